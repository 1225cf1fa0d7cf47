"""One update changes every actor and critic parameter; the update does the work once."""

import pytest
import torch

from comlrl.core.logging.jsonl import read_metrics
from comlrl.core.training.value_step import value_step

from .helpers import make_iac, make_maac


def _snapshot(model):
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def _assert_all_changed(label, model, before):
    for name, p in model.named_parameters():
        assert not torch.equal(p.detach(), before[name]), f"{label}: {name} unchanged"


def _one_update(trainer):
    """Train on one buffer's worth of samples: exactly one drain."""
    trainer.train()


# weight_decay=0: a parameter changes only if its gradient reached it
@pytest.mark.parametrize("critic_type", ["v", "q"])
@pytest.mark.parametrize("separate", [True, False])
def test_iac_one_update_changes_every_parameter(tmp_path, separate, critic_type):
    trainer = make_iac(tmp_path, separate=separate, critic_type=critic_type, weight_decay=0.0)
    critics = trainer.critics if separate else trainer.value_heads
    before = [_snapshot(m) for m in trainer.agents + critics]
    _one_update(trainer)
    for i, (model, snap) in enumerate(zip(trainer.agents + critics, before)):
        _assert_all_changed(f"model {i}", model, snap)
    recs = read_metrics(tmp_path / "run" / "metrics.jsonl")
    assert len([r for r in recs if "agent_0/actor_loss" in r]) == 1


@pytest.mark.parametrize("critic_type", ["v", "q"])
def test_maac_one_update_changes_every_parameter(tmp_path, critic_type):
    trainer = make_maac(tmp_path, critic_type=critic_type, weight_decay=0.0)
    before = [_snapshot(m) for m in trainer.agents + trainer.critics]
    _one_update(trainer)
    for i, (model, snap) in enumerate(zip(trainer.agents + trainer.critics, before)):
        _assert_all_changed(f"model {i}", model, snap)


def test_maac_critic_steps_once_per_minibatch_of_joint_samples(tmp_path):
    trainer = make_maac(tmp_path, train_batch_size=2)
    steps = []
    opt = trainer.critic_optimizers[0]
    original = opt.step
    opt.step = lambda *a, **k: steps.append(1) or original(*a, **k)
    _one_update(trainer)
    # 2 items x 2 generations = 4 joint samples, mini-batches of 2: two critic steps, not 2 x N
    assert len(steps) == 2
    state = opt.state[next(trainer.critic.parameters())]
    assert int(state["step"]) == 2


def test_per_agent_metrics_are_logged(tmp_path):
    trainer = make_iac(tmp_path)
    _one_update(trainer)
    (rec,) = [
        r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if "agent_0/actor_loss" in r
    ]
    for i in range(2):
        for key in (
            "actor_loss",
            "critic_loss",
            "value_mean",
            "advantage_mean",
            "advantage_std",
            "explained_variance",
            "grad_norm",
        ):
            assert f"agent_{i}/{key}" in rec
    assert rec["turn_1/reward_mean"] == rec["turn_1/reward_mean"]  # finite, not NaN
    assert rec["step"] == trainer.env_step == 4


def test_maac_logs_its_critic(tmp_path):
    trainer = make_maac(tmp_path)
    _one_update(trainer)
    (rec,) = [
        r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if "critic/critic_loss" in r
    ]
    assert {
        "critic/value_mean",
        "critic/explained_variance",
        "agent_1/actor_loss",
        "agent_1/advantage_std",
        "agent_1/value_mean",
    } <= set(rec)


def test_no_forward_outside_the_update_needs_gradients(tmp_path, monkeypatch):
    """Rollout-time values run under no_grad, once per prompt; updates run batched."""
    import comlrl.core.logprobs.values as values

    calls = []
    original = values.last_token_values

    def spy(backbone, head, rows, pad_id):
        calls.append((torch.is_grad_enabled(), len(rows)))
        return original(backbone, head, rows, pad_id)

    monkeypatch.setattr(values, "last_token_values", spy)
    monkeypatch.setattr("comlrl.core.training.value_step.last_token_values", spy)
    trainer = make_iac(tmp_path)
    _one_update(trainer)
    rollout = [c for c in calls if not c[0]]
    update = [c for c in calls if c[0]]
    # 2 agents x 1 batched call over the 2 prompts (not 2 prompts x 2 generations)
    assert rollout == [(False, 2), (False, 2)]
    # one batched critic forward per agent and mini-batch: the 4 samples' 2 distinct prompts
    # (a prompt's K samples share its value, so it is encoded once)
    assert update == [(True, 2), (True, 2)]


def test_value_head_reads_values_from_the_policy_forward(tmp_path, monkeypatch):
    import comlrl.ac.iac as iac

    calls = []
    original = iac.logprobs_and_values
    monkeypatch.setattr(
        iac,
        "logprobs_and_values",
        lambda *a, **k: calls.append(len(a[2])) or original(*a, **k),
    )
    forwards = []
    monkeypatch.setattr(
        "comlrl.core.training.policy_update.token_logprobs_parts",
        lambda *a, **k: forwards.append(1) / 0,
    )
    trainer = make_iac(tmp_path, separate=False)
    _one_update(trainer)
    assert calls == [4, 4] and forwards == []


def test_nonfinite_loss_raises_or_skips(tmp_path):
    def nan_values(agent, rows):
        return [float("nan")] * len(rows)

    trainer = make_iac(tmp_path)
    trainer.values_of = nan_values
    with pytest.raises(FloatingPointError, match="IAC"):
        trainer.train()
    trainer = make_iac(tmp_path / "b", nonfinite_loss="skip")
    trainer.values_of = nan_values
    with pytest.warns(UserWarning, match="non-finite"):
        trainer.train()
    assert trainer.run_state.skipped_nonfinite > 0


@pytest.mark.parametrize("clip", [None, 0.2])
def test_critic_step_encodes_repeated_rows_once_with_the_same_gradient(tmp_path, clip, monkeypatch):
    from comlrl.ac.targets import critic_rows, value_error

    trainer = make_maac(tmp_path, logprob_max_tokens=12)
    trainer.args.value_clip_range = clip
    critic = trainer.critic
    pad = trainer.tokenizers[0].pad_token_id
    a, b, c = [5, 6, 7, 8], [9, 10], [11, 12, 13, 14, 15, 16]
    rows = [a, b, a, c, a, b]  # K samples of a prompt share its row
    targets = [0.5, -1.0, 2.0, 0.25, -0.5, 1.5]
    old = [0.1, -0.2, 0.1, 0.3, 0.1, -0.2]
    forwards = []
    original = critic.last_token_values

    def counted(body, head, r, p):
        forwards.append(len(r))
        return original(r, p)

    monkeypatch.setattr("comlrl.core.training.value_step.last_token_values", counted)
    seen: dict[int, torch.Tensor] = {}

    class Recording(torch.optim.SGD):
        # The step frees the gradients it used, so they are read when the optimizer steps.
        def step(self, closure=None):
            for group in self.param_groups:
                seen.update({id(p): p.grad.clone() for p in group["params"] if p.grad is not None})
            return super().step(closure)

    opt = Recording(critic.parameters(), lr=0.0)
    err = value_step(trainer, critic_rows(trainer.args, critic, opt, rows, targets, old, pad, "t"))
    got = {n: seen[id(p)] for n, p in critic.named_parameters() if id(p) in seen}
    assert got
    assert sum(forwards) == 3  # three distinct rows, not six
    critic.zero_grad(set_to_none=True)
    total = 0.0
    for r, t, o in zip(rows, targets, old):  # each row alone, as before
        v = original([r], pad)
        e = value_error(v, torch.tensor([t]), torch.tensor([o]), clip)
        (trainer.args.value_loss_coef * e.sum() / len(rows)).backward()
        total += e.item()
    assert err == pytest.approx(total / len(rows), abs=1e-5)
    for n, p in critic.named_parameters():
        if p.grad is not None:
            assert torch.allclose(got[n], p.grad, atol=1e-6, rtol=1e-4), n
