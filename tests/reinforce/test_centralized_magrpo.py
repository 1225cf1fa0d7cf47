"""CentralizedMAGRPO: config constraints, constructor checks, and a short training run."""

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from comlrl.core.logging.jsonl import read_metrics
from comlrl.core.testing import tiny_pair
from comlrl.reinforce import CentralizedMAGRPOConfig, CentralizedMAGRPOTrainer, MAGRPOConfig
from comlrl.reinforce.centralized import TaggedCentralizedComparatorAdapter

PROMPTS = [{"prompt": f"Write a story about {t}."} for t in ("a cat", "the sea", "a robot")]


def _config(**kw):
    base = dict(
        num_train_epochs=1,
        num_generations=2,
        max_new_tokens=8,
        temperature=1.0,
        top_p=1.0,
        top_k=None,
        rollout_buffer_size=2,
        agent_learning_rate=1e-3,
        logging_steps=1,
        eval_interval=0,
        seed=0,
    )
    base.update(kw)
    return CentralizedMAGRPOConfig(**base)


class HalfAdapter:
    """Splits a joint completion into its first and second half (never fails)."""

    def build_prompt(self, item, prompts):
        return "Two parts: " + " / ".join(prompts)

    def parse_completion(self, completion, item, num_agents):
        mid = len(completion) // 2
        return [completion[:mid], completion[mid:]]


@settings(max_examples=20, deadline=None)
@given(
    mode=st.sampled_from(["decentralized", "both", "", 3]),
    turns=st.integers(2, 5),
    roles=st.one_of(st.integers(-3, 0), st.just(1.5)),
)
def test_config_constraints_name_the_field(mode, turns, roles):
    assert CentralizedMAGRPOConfig().num_turns == 1
    assert CentralizedMAGRPOConfig(collaboration_mode="Centralised").collaboration_mode == (
        "centralized"
    )
    with pytest.raises(ValueError, match="collaboration_mode") as info:
        CentralizedMAGRPOConfig(collaboration_mode=mode)
    assert "centralized collaboration" in str(info.value)
    with pytest.raises(ValueError, match="num_turns=1"):
        CentralizedMAGRPOConfig(num_turns=turns)
    with pytest.raises(ValueError, match="num_agents"):
        CentralizedMAGRPOConfig(num_agents=roles)


def test_inherits_every_magrpo_field():
    names = {f.name for f in dataclasses.fields(CentralizedMAGRPOConfig)}
    own = {
        "collaboration_mode",
        "centralized_parse",
        "layout_warmup_steps",
        "layout_warmup_learning_rate",
    }
    assert names == {f.name for f in dataclasses.fields(MAGRPOConfig)} | own
    with pytest.raises(ValueError, match="num_generations"):
        CentralizedMAGRPOConfig(num_generations=1)


def test_constructor_checks(tmp_path):
    model, tok = tiny_pair()
    ok = dict(agents=[model], tokenizer=tok, reward_func=lambda a, b: [0.0] * len(a))
    with pytest.raises(ValueError, match="centralized configuration"):
        CentralizedMAGRPOTrainer(**ok, args=MAGRPOConfig(num_turns=1))
    with pytest.raises(ValueError, match="role count"):
        CentralizedMAGRPOTrainer(**ok, num_agents=3, args=_config())
    with pytest.raises(ValueError, match="exactly one actor"):
        CentralizedMAGRPOTrainer(**{**ok, "agents": [model, model]}, args=_config())
    with pytest.raises(ValueError, match="one actor tokenizer"):
        CentralizedMAGRPOTrainer(**{**ok, "tokenizer": [tok, tok]}, args=_config())
    with pytest.raises(ValueError, match="reward_func"):
        CentralizedMAGRPOTrainer(**{**ok, "reward_func": None}, args=_config())
    with pytest.raises(TypeError, match="build_prompt"):
        CentralizedMAGRPOTrainer(**ok, args=_config(), centralized_adapter=object())


def test_one_actor_learns_every_role(tmp_path):
    model, tok = tiny_pair(seed=2)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    seen, logged = [], []

    def reward(first, second):
        seen.append((list(first), list(second)))
        return [float(len(b) - len(a)) / 10 for a, b in zip(first, second)]

    def eval_logger(agent_completions_turns, batch_items, prompts):
        logged.append(agent_completions_turns)
        return [{"n": 1.0} for _ in batch_items]

    trainer = CentralizedMAGRPOTrainer(
        agents=[model],
        tokenizer=[tok],
        num_agents=2,
        train_dataset=PROMPTS[:2],
        eval_dataset=PROMPTS[2:],
        reward_func=reward,
        eval_logger=eval_logger,
        eval_aggregator=lambda rows, num_turns: {"n": float(len(rows))},
        args=_config(output_dir=str(tmp_path / "run"), eval_interval=1, eval_num_samples=1),
        centralized_adapter=HalfAdapter(),
    )
    assert trainer.num_agents == 1 and trainer.num_roles == 2
    cfg = trainer.run_config()
    assert (cfg["algorithm"], cfg["num_roles"], cfg["num_actor_models"]) == ("MAGRPO", 2, 1)
    assert "comparator_generation_mode" not in cfg
    trainer.train()
    assert any(not p.detach().equal(before[n]) for n, p in model.named_parameters())
    assert seen and all(len(a) == len(b) for a, b in seen)
    # the eval logger sees [role][item][turn], like a decentralized run
    assert logged and len(logged[0]) == 2 and len(logged[0][0]) == 1 and len(logged[0][0][0]) == 1
    records = read_metrics(tmp_path / "run" / "metrics.jsonl")
    train = [r for r in records if "turn_1/reward_mean" in r]
    assert train and all(r["centralized/parse_failures"] == 0.0 for r in train)
    assert any("eval/n" in r for r in records)


def test_malformed_joint_completions_are_counted(tmp_path):
    model, tok = tiny_pair(seed=5)
    trainer = CentralizedMAGRPOTrainer(
        agents=[model],
        tokenizer=tok,
        train_dataset=PROMPTS[:2],
        reward_func=lambda a, b: [float(len(x) + len(y)) for x, y in zip(a, b)],
        args=_config(output_dir=str(tmp_path / "run")),
        centralized_adapter=TaggedCentralizedComparatorAdapter(),
    )
    trainer.train()
    failures = trainer.collaboration.parse_failures
    assert failures > 0  # an untrained tiny model does not write the tags
    records = read_metrics(tmp_path / "run" / "metrics.jsonl")
    assert records[-1]["centralized/parse_failures"] == float(failures)


def test_layout_settings_are_checked():
    assert CentralizedMAGRPOConfig().centralized_parse == "lenient"
    assert CentralizedMAGRPOConfig(centralized_parse=" Strict ").centralized_parse == "strict"
    with pytest.raises(ValueError, match="centralized_parse must be one of"):
        CentralizedMAGRPOConfig(centralized_parse="loose")
    with pytest.raises(ValueError, match="layout_warmup_steps"):
        CentralizedMAGRPOConfig(layout_warmup_steps=-1)
    with pytest.raises(ValueError, match="layout_warmup_learning_rate"):
        CentralizedMAGRPOConfig(layout_warmup_learning_rate=0.0)


@pytest.mark.parametrize("mode", ["lenient", "strict"])
def test_default_adapter_follows_centralized_parse(mode):
    model, tok = tiny_pair()
    trainer = CentralizedMAGRPOTrainer(
        agents=[model],
        tokenizer=tok,
        train_dataset=PROMPTS[:1],
        reward_func=lambda a, b: [0.0] * len(a),
        args=_config(centralized_parse=mode),
    )
    assert trainer.centralized_adapter.mode == mode
    prompt = trainer.formatters[0](PROMPTS[0])
    assert prompt.endswith("<agent_0>\n") == (mode == "lenient")


def test_parse_failure_rate_and_warmup_in_metrics(tmp_path):
    model, tok = tiny_pair(seed=3)
    trainer = CentralizedMAGRPOTrainer(
        agents=[model],
        tokenizer=tok,
        train_dataset=PROMPTS[:2],
        reward_func=lambda a, b: [float(len(x) > 0) for x in b],
        args=_config(output_dir=str(tmp_path / "run"), layout_warmup_steps=3),
    )
    trainer.train()
    assert trainer.layout_warmed_up and trainer.state_dict()["layout_warmed_up"] is True
    records = read_metrics(tmp_path / "run" / "metrics.jsonl")
    train = [r for r in records if "turn_1/reward_mean" in r]
    rates = [r["centralized/parse_failure_rate"] for r in train]
    assert len(rates) == len(train) and all(0.0 <= v <= 1.0 for v in rates)
    fractions = [r["centralized/layout_fraction"] for r in train]
    # a step's failure rate counts the completions whose layout missed a role
    assert all(f < 1.0 for f, v in zip(fractions, rates) if v > 0)
    first = train[0]
    assert first["centralized/warmup_nll_last"] < first["centralized/warmup_nll_first"]
    assert all("centralized/warmup_nll_first" not in r for r in train[1:])
