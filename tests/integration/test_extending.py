"""The worked extension examples of CONTRIBUTING.md: each adds one piece through its public
contract (a loss, a sink, a backend, an algorithm) and trains with it."""

import csv
import importlib.util
import math
import sys
from pathlib import Path

import pytest

from comlrl.core.logging.jsonl import read_metrics

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "extending"


def _load(name):
    # once per process: an example registers its function by name when it is imported
    if f"extending_{name}" in sys.modules:
        return sys.modules[f"extending_{name}"]
    spec = importlib.util.spec_from_file_location(f"extending_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _weights(model):
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def _moved(model, before):
    return any(not p.detach().equal(before[n]) for n, p in model.named_parameters())


def test_a_registered_loss_trains_by_name(tmp_path):
    module = _load("custom_loss")
    trainer = module.main(["--out", str(tmp_path / "run")])
    assert trainer.policy_loss is module.sequence_ratio_loss
    records = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if "agent_0/loss" in r]
    assert records
    for r in records:
        # one update per rollout, so every ratio starts at 1 (old log-probs taken at rollout)
        assert math.isfinite(r["agent_0/ratio_mean"]) and abs(r["agent_1/ratio_mean"] - 1) < 0.2
        assert 0.0 <= r["agent_0/clip_fraction"] <= 1.0


def _family_trainer(name, out):
    """A short length-ratio trainer of family ``name`` whose policy loss is the example's."""
    from comlrl.ac import IACConfig, IACTrainer, MAACConfig, MAACTrainer
    from comlrl.core.testing import tiny_model_dir
    from comlrl.pbrl import MARLHFConfig, MARLHFTrainer

    sys.path.insert(0, str(EXAMPLES))
    from _common import tiny_run

    if name == "iac":
        return tiny_run(
            IACTrainer, IACConfig, out, policy_loss="sequence_ratio", use_separate_critic=False
        )
    if name == "maac":
        critic = {"critic_model": tiny_model_dir()}
        return tiny_run(MAACTrainer, MAACConfig, out, critic, policy_loss="sequence_ratio")
    rl = name.removeprefix("marlhf_")
    return tiny_run(
        MARLHFTrainer,
        MARLHFConfig,
        out,
        policy_loss="sequence_ratio",
        rl_algorithm=rl,
        preference_num_candidates=2,
        reward_learning_rate=1e-3,
        **({"use_separate_critic": False} if rl == "iac" else {}),
    )


@pytest.mark.parametrize("family", ["iac", "maac", "marlhf_magrpo", "marlhf_iac"])
def test_the_registered_loss_trains_every_policy_family_by_name(tmp_path, family):
    from comlrl.core import algos

    real = _load("custom_loss").sequence_ratio_loss
    calls = []

    def counting(*args):
        calls.append(args[1] is not None)  # the rollout's log-probs come with every call
        return real(*args)

    counting.needs_old_logps = True
    registry = algos.registry._REGISTRIES["policy_loss"]
    registry["sequence_ratio"] = counting  # what the name resolves to while this run trains
    try:
        trainer = _family_trainer(family, str(tmp_path / "run"))
        policy = getattr(trainer, "rl_trainer", trainer)
        before = [_weights(m) for m in policy.agents]
        trainer.train()
    finally:
        registry["sequence_ratio"] = real
    assert calls and all(calls)
    assert all(_moved(m, b) for m, b in zip(policy.agents, before))


def test_the_sequence_ratio_loss_matches_hand_values():
    import torch

    from comlrl.core.logprobs import TokenLogprobs

    loss_fn = _load("custom_loss").sequence_ratio_loss
    values = torch.tensor([[-1.0, -2.0], [-0.5, 0.0]], requires_grad=True)
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    old = torch.tensor([[-1.5, -2.5], [-0.5, 0.0]])
    adv = torch.tensor([2.0, -1.0])
    weights = torch.tensor([0.5, 0.5])
    loss, metrics = loss_fn(TokenLogprobs(values, mask), old, adv, weights, None)
    # row 0: ratio exp(0.5) = 1.6487 is clipped to 1.2 for A > 0; row 1: ratio 1
    assert abs(loss.item() - (-(0.5 * 1.2 * 2.0) + 0.5 * 1.0)) < 1e-6
    assert metrics["clip_fraction"] == 0.5


def test_a_registered_sink_receives_the_training_records(tmp_path):
    module = _load("custom_sink")
    module.main(["--out", str(tmp_path / "run")])
    with open(tmp_path / "run" / "metrics.csv") as f:
        rows = list(csv.reader(f))
    keys = {key for _, key, _ in rows}
    assert "turn_1/reward_mean" in keys and "agent_1/loss" in keys
    logged = read_metrics(tmp_path / "run" / "metrics.jsonl")
    assert len({int(step) for step, _, _ in rows}) == len({r["step"] for r in logged})


def test_a_custom_backend_serves_every_rollout_and_hears_every_update(tmp_path):
    module = _load("custom_backend")
    trainer, backend = module.main(["--out", str(tmp_path / "run")])
    # 4 items in batches of 2: two rollout batches, one generate call per agent each
    assert backend.requests == 2 * 2
    assert backend.tokens > 0
    # one optimizer step per agent and mini-batch: train_batch_size = rollout_buffer_size = 2
    assert backend.updates == 2 * 2


def test_a_new_algorithm_runs_on_the_shared_loop(tmp_path):
    module = _load("custom_algorithm")
    trainer = module.main(["--out", str(tmp_path / "run")])
    records = read_metrics(tmp_path / "run" / "metrics.jsonl")
    updates = [r for r in records if "agent_0/loss" in r]
    assert len(updates) == 2 and all("best_reward_mean" in r for r in updates)
    assert all("timing/generate" in r for r in updates)
    assert trainer.run_state.global_batch == 2 and trainer.env_step > 0
