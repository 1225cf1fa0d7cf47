"""What a run prints: no per-file bars from transformers, labels that say what they show, and
reward messages that name the setting to change."""

import pytest
from transformers import AutoModelForCausalLM
from transformers.utils import logging as tf_logging

from comlrl.core.rewards import RewardCaller, RewardError
from comlrl.core.testing import tiny_pair
from comlrl.pbrl import MADPOConfig, MADPOTrainer
from comlrl.reinforce import MAGRPOConfig, MAGRPOTrainer

ITEMS = [{"prompt": "Write a story about a cat."}, {"prompt": "Write a story about the sea."}]
BARS = ("Loading weights", "Writing model shards")


def reward(a, b):
    return [float(len(y) - len(x)) / 10.0 for x, y in zip(a, b)]


def test_transformers_draws_these_bars_outside_the_trainer(tiny_dir, tmp_path, capsys):
    # The control for the test below: without CoMLRL in the way, both bars appear.
    model = AutoModelForCausalLM.from_pretrained(tiny_dir)
    model.save_pretrained(tmp_path / "copy")
    err = capsys.readouterr().err
    assert all(bar in err for bar in BARS), err[-500:]


def test_loading_and_saving_agents_draws_no_transformers_bars(tiny_dir, tmp_path, capsys):
    before = tf_logging.is_progress_bar_enabled()
    trainer = MAGRPOTrainer(
        agent_model=tiny_dir,
        num_agents=2,
        train_dataset=ITEMS,
        reward_func=reward,
        args=MAGRPOConfig(num_turns=1, num_generations=2, output_dir=str(tmp_path / "run")),
    )
    trainer.save_model(str(tmp_path / "saved"))
    err = capsys.readouterr().err
    assert not any(bar in err for bar in BARS), err[-500:]
    assert (tmp_path / "saved" / "agent_1" / "config.json").exists()
    # The user's own setting is back once the trainer is done with transformers.
    assert tf_logging.is_progress_bar_enabled() == before


def test_madpo_progress_bar_calls_its_number_dpo_accuracy(tmp_path, capsys):
    m0, tok = tiny_pair(seed=0)
    m1, _ = tiny_pair(seed=1)
    ratio = lambda a, b: [min(1.0, (len(y) + 1) / (3.0 * (len(x) + 1))) for x, y in zip(a, b)]  # noqa: E731
    trainer = MADPOTrainer(
        agents=[m0, m1],
        tokenizer=tok,
        train_dataset=ITEMS,
        reward_func=ratio,
        args=MADPOConfig(
            num_train_epochs=1,
            max_new_tokens=6,
            temperature=1.0,
            top_p=1.0,
            top_k=None,
            preference_num_candidates=3,
            train_batch_size=2,
            eval_interval=0,
            logging_steps=1,
            seed=0,
            output_dir=str(tmp_path / "run"),
        ),
    )
    trainer.train()
    err = capsys.readouterr().err
    assert trainer.preference_pairs, "the run must sample pairs for the bar to show a number"
    assert "dpo_accuracy=" in err
    assert "reward=" not in err


def test_scalar_reward_fallback_names_the_config_field():
    caller = RewardCaller(lambda a, b: 1.0, num_agents=2)
    with pytest.warns(UserWarning, match=r"reward_call_mode='per_sample'"):
        caller([["a", "b"], ["c", "d"]], prompts=["p", "q"], batch_items=[{}, {}])


def test_trl_style_reward_gets_a_hint_about_per_agent_lists():
    def trl_reward(completions, **kwargs):
        return [float(len(c)) for c in completions]

    caller = RewardCaller(trl_reward, num_agents=2)
    with pytest.raises(RewardError, match="one list of completions per agent") as info:
        caller(
            [["a", "b", "c", "d"], ["e", "f", "g", "h"]],
            prompts=["p"] * 4,
            batch_items=[{}] * 4,
        )
    assert "returned 2 values for 4 joint actions" in str(info.value)
    assert "zip(*completions)" in str(info.value)


def test_a_wrong_count_from_a_per_agent_reward_gets_no_such_hint():
    # 4 values for 3 joint actions of 2 agents: neither shared nor per-agent (2 values per call
    # is the 1.4.3 per-agent style and is accepted)
    caller = RewardCaller(lambda a, b: [1.0, 2.0, 3.0, 4.0], num_agents=2)
    with pytest.raises(RewardError) as info:
        caller([["a", "b", "c"], ["d", "e", "f"]], prompts=["p"] * 3, batch_items=[{}] * 3)
    assert "one list of completions per agent" not in str(info.value)
