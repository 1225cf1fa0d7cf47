"""MAGRPO trainer behaviour on tiny in-process models."""

import math
import sys

import pytest
import torch

from comlrl.core.logging.jsonl import read_metrics
from comlrl.core.rewards import RewardError
from comlrl.core.testing import tiny_pair
from comlrl.reinforce import MAGRPOTrainer

from .helpers import PROMPTS, length_reward, make_config, make_trainer


def _snapshot(model):
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


def test_every_parameter_changes_after_one_update(tmp_path):
    trainer = make_trainer(tmp_path)
    before = [_snapshot(m) for m in trainer.agents]
    trainer.train()
    for i, (model, snap) in enumerate(zip(trainer.agents, before)):
        for name, p in model.named_parameters():
            assert not torch.equal(p.detach(), snap[name]), f"agent {i} {name} unchanged"


def test_shared_weights_keep_separate_optimizers(tmp_path):
    model, tok = tiny_pair()
    trainer = make_trainer(tmp_path, agents=[model, model], tokenizer=tok)
    assert trainer.agents[0] is trainer.agents[1]
    assert trainer.optimizers[0] is not trainer.optimizers[1]
    trainer.train()
    s0 = trainer.optimizers[0].state
    s1 = trainer.optimizers[1].state
    assert s0 and s1
    p = next(model.parameters())
    assert s0[p]["exp_avg"] is not s1[p]["exp_avg"]
    assert int(s0[p]["step"]) >= 1 and int(s1[p]["step"]) >= 1
    assert not torch.equal(s0[p]["exp_avg"], s1[p]["exp_avg"])


def test_single_agent_grpo(tmp_path):
    model, tok = tiny_pair()
    trainer = MAGRPOTrainer(
        agent_model=None,
        agents=[model],
        tokenizer=tok,
        train_dataset=PROMPTS[:2],
        reward_func=lambda c: [len(x) for x in c],
        args=make_config(output_dir=str(tmp_path / "r")),
    )
    before = _snapshot(model)
    trainer.train()
    assert trainer.num_agents == 1
    assert any(not torch.equal(p, before[n]) for n, p in model.named_parameters())
    recs = read_metrics(tmp_path / "r" / "metrics.jsonl")
    assert recs and all(math.isfinite(r["turn_1/reward_mean"]) for r in recs)


def wrong_count_reward(a, b):
    return [1.0, 2.0, 3.0]


def nan_reward(a, b):
    return [float("nan")] * len(a)


def inf_reward(a, b):
    return [float("inf")] * len(a)


@pytest.mark.parametrize(
    "reward, needle", [(wrong_count_reward, "3"), (nan_reward, "nan"), (inf_reward, "inf")]
)
def test_bad_rewards_name_the_function(tmp_path, reward, needle):
    trainer = make_trainer(tmp_path, reward=reward)
    with pytest.raises(RewardError) as err:
        trainer.train()
    assert reward.__name__ in str(err.value)
    assert needle in str(err.value).lower()


def test_type_error_inside_reward_surfaces_unchanged(tmp_path):
    calls = []
    boom = TypeError("inner failure")

    def reward(a, b):
        calls.append(1)
        raise boom

    trainer = make_trainer(tmp_path, reward=reward)
    with pytest.raises(TypeError) as err:
        trainer.train()
    assert err.value is boom
    assert len(calls) == 1


def test_cheap_errors_before_loading(tmp_path):
    loads = []
    import comlrl.core.models as models

    orig = models.load_causal_lm
    models.load_causal_lm = lambda *a, **k: loads.append(a) or orig(*a, **k)
    try:
        with pytest.raises(ValueError, match="reward_func"):
            MAGRPOTrainer(agent_model="/nonexistent", args=make_config())
        with pytest.raises(ValueError, match="external_transition"):
            MAGRPOTrainer(
                agent_model="/nonexistent", reward_func=length_reward, args=make_config(num_turns=2)
            )
        with pytest.raises(ValueError, match="agent_model or agents"):
            MAGRPOTrainer(reward_func=length_reward, args=make_config())
        with pytest.raises(ValueError, match="Number of formatters"):
            MAGRPOTrainer(
                agent_model="/x",
                num_agents=2,
                reward_func=length_reward,
                formatters=[str, str, str],
                args=make_config(),
            )
        with pytest.raises(ValueError, match="tokenizers length"):
            m, tok = tiny_pair()
            MAGRPOTrainer(
                agents=[m, m], tokenizer=[tok], reward_func=length_reward, args=make_config()
            )
        with pytest.raises(ValueError, match="num_agents"):
            MAGRPOTrainer(
                agents=[m, m, m],
                reward_func=length_reward,
                tokenizer=tok,
                args=make_config(num_agents=2),
            )
    finally:
        models.load_causal_lm = orig
    assert loads == []


def test_agents_from_directories_and_save_model_reload(tmp_path, tiny_dir):
    trainer = MAGRPOTrainer(
        agents=[tiny_dir, tiny_dir],
        train_dataset=PROMPTS[:2],
        reward_func=length_reward,
        args=make_config(output_dir=str(tmp_path / "r")),
    )
    assert trainer.agents[0] is not trainer.agents[1]  # loaded once, copied: not shared
    trainer.train()
    trainer.save_model(str(tmp_path / "out"))
    from transformers import AutoModelForCausalLM

    for i in range(2):
        reloaded = AutoModelForCausalLM.from_pretrained(tmp_path / "out" / f"agent_{i}")
        for (n, p), (_, q) in zip(
            reloaded.named_parameters(), trainer.agents[i].named_parameters()
        ):
            assert torch.equal(p, q.detach().cpu()), n


def test_multi_turn_cross_mode_runs(tmp_path):
    def transition(
        *,
        prompt,
        agent_completions,
        num_agents,
        prompt_history_per_agent,
        response_history_per_agent,
    ):
        return [prompt + " again"] * num_agents

    m0, tok = tiny_pair(seed=0)
    m1, _ = tiny_pair(seed=1)
    trainer = MAGRPOTrainer(
        agents=[m0, m1],
        tokenizer=tok,
        train_dataset=PROMPTS[:1],
        reward_func=length_reward,
        external_transition=transition,
        args=make_config(num_turns=2, joint_mode="cross", output_dir=str(tmp_path / "r")),
    )
    trainer.train()
    # cross, K=2, N=2: 4 joint actions at the root, 4 children with 4 each
    assert trainer.env_step == 4 + 4 * 4
    recs = read_metrics(tmp_path / "r" / "metrics.jsonl")
    assert any("turn_2/reward_mean" in r for r in recs)


def test_reference_kl_metrics(tmp_path):
    trainer = make_trainer(tmp_path, reference_kl_enabled=True, reference_kl_coef=0.5)
    assert len(trainer.reference_models) == 2
    trainer.train()
    recs = read_metrics(tmp_path / "run" / "metrics.jsonl")
    kl = [r["turn_1/reference_kl_mean"] for r in recs if "turn_1/reference_kl_mean" in r]
    assert kl and all(k >= 0 for k in kl)
    assert all(not p.requires_grad for p in trainer.reference_models[0].parameters())


def test_training_without_wandb_installed(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb now raises ImportError
    trainer = make_trainer(tmp_path)
    trainer.train()
    assert read_metrics(tmp_path / "run" / "metrics.jsonl")
    with pytest.raises(ImportError, match="wandb"):
        t2 = make_trainer(tmp_path / "b")
        t2.args.report_to = ["wandb"]
        t2.wandb_config = {"project": "x"}
        t2.train()


def test_eval_metrics_and_hooks(tmp_path):
    seen = {}

    def eval_logger(*, agent_completions_turns, batch_items, prompts):
        seen["shape"] = (
            len(agent_completions_turns),
            len(agent_completions_turns[0]),
            len(agent_completions_turns[0][0]),
        )
        return [{"len": len(c[0])} for c in agent_completions_turns[0]]

    def eval_aggregator(detailed, num_turns):
        return {"turn_1/mean_len": sum(d["len"] for d in detailed) / len(detailed)}

    m0, tok = tiny_pair(seed=0)
    trainer = MAGRPOTrainer(
        agents=[m0, m0],
        tokenizer=tok,
        train_dataset=PROMPTS[:2],
        eval_dataset=PROMPTS,
        reward_func=length_reward,
        eval_logger=eval_logger,
        eval_aggregator=eval_aggregator,
        args=make_config(
            eval_interval=1, eval_num_samples=3, eval_batch_size=2, output_dir=str(tmp_path / "r")
        ),
    )
    metrics = trainer.evaluate()
    assert seen["shape"] == (2, 3, 1)
    assert set(metrics) == {
        "eval/turn_1/reward_mean",
        "eval/turn_1/expected_return",
        "eval/turn_1/mean_len",
    }
    assert trainer.evaluate(num_eval_samples=0) == {}
