"""The reward-hacking monitors' logic on a synthetic run that drifts on purpose: crafted
experience and step reports fed to the trainer's ``monitors`` collaborator, update by update,
with thresholds set so that exactly some monitors cross; plus the config section's checks."""

from __future__ import annotations

import json
import warnings
from types import SimpleNamespace

import pytest

from comlrl.core.distributed import local_context
from comlrl.core.loop.run_state import RunState
from comlrl.core.monitors import SUMMARY_FILE, Monitors, MonitorsConfig, MonitorWarning
from comlrl.core.monitors.metrics import key, parse_key, record_values
from comlrl.core.rollout.record import RolloutGroup
from comlrl.core.training.train_step import Target


def _trainer(tmp_path, **monitors):
    args = SimpleNamespace(
        monitors=MonitorsConfig(**monitors), reference_kl_enabled=True, reference_kl_coef=0.5
    )
    return SimpleNamespace(
        args=args,
        dist=local_context(),
        run_state=RunState(),
        reporting=SimpleNamespace(run_dir=str(tmp_path)),
    )


def _monitors(t) -> Monitors:
    return Monitors(t.args, t.dist, t.run_state, t.reporting)


def _group(agent: int, length: int, rewards: list[float], kl_per_token: float) -> RolloutGroup:
    """A group of K completions of ``length`` tokens with these task rewards, shaped by the
    trainer's KL coefficient 0.5."""
    kls = [kl_per_token * length] * len(rewards)
    return RolloutGroup(
        agent=agent,
        turn=0,
        step=0,
        prompt_ids=[1, 2],
        completion_ids=[[3] * length for _ in rewards],
        returns=[r - 0.5 * k for r, k in zip(rewards, kls)],
        rewards=[r - 0.5 * k for r, k in zip(rewards, kls)],
        kls=kls,
        node_reward=sum(rewards) / len(rewards),
    )


def _drifting_update(monitors: Monitors, u: int):
    """Update ``u`` of the drifting run, for agent 0 only: lengths double over the run, the
    KL grows quadratically (accelerates), entropy decays, groups lose their reward spread
    from update 6, and the ratio clips stay low; the policy steps report through the same
    meter a real step would."""
    length = 10 + 2 * u
    tied = u >= 6
    groups = [
        _group(0, length, [1.0, 1.0] if tied or g == 0 else [0.0, 1.0], 0.01 * u * u)
        for g in range(4)
    ]
    watch = monitors.watched_step([Target([], None, agent=0, turn=0)])
    entropy = 2.0 * 0.7**u
    import torch

    watch.add(torch.full((2, 3), entropy), torch.ones(2, 3))
    watch.record({"clip_fraction": [0.05, 0.07]})
    return monitors.after_update([groups], {"agent_0/loss": 1.0}, step=4 * (u + 1))


def test_the_drifting_run_crosses_exactly_the_watched_monitors(tmp_path):
    t = _trainer(
        tmp_path,
        kl_max=0.6,
        kl_acceleration_max=0.015,
        entropy_min=0.1,
        length_drift_max=0.5,
        zero_variance_max=0.9,  # the tied groups reach 1.0
        clip_fraction_max=0.5,  # never reached: the clips stay at 0.06
        train_eval_gap_max=None,  # measured, not watched
        window=3,
        patience=2,
    )
    monitors = _monitors(t)
    t.monitors = monitors
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        logged = []
        for u in range(12):
            logged.append(_drifting_update(monitors, u))
            t.run_state.environment_steps = 4 * (u + 1)
            if u % 3 == 2:
                monitors.after_eval({"eval/turn_1/reward_mean": 0.2})
    messages = [str(w.message) for w in caught if issubclass(w.category, MonitorWarning)]
    crossed = {
        parse_key(k)[2] for k, s in monitors.watcher.summary().items() if s["crossed_at_step"]
    }
    assert crossed == {"kl", "kl_acceleration", "entropy", "length_drift", "zero_variance_fraction"}
    assert len(messages) == len(crossed)  # once each, however long the drift goes on
    kl_message = next(m for m in messages if m.startswith("monitor kl "))
    assert "agent 0, turn 1" in kl_message and "monitors.kl_max=0.6" in kl_message
    assert "recent values [" in kl_message and "slope +" in kl_message
    # Every monitor is in the records, the derived ones once their inputs exist.
    last = logged[-1]
    for name in ("kl", "kl_acceleration", "entropy", "length_drift", "completion_length"):
        assert key(0, 0, name) in last, name
    assert last[key(0, 0, "zero_variance_fraction")] == 1.0
    assert last["agent_0/loss"] == 1.0
    assert key(0, 0, "clip_fraction") in logged[0]
    assert key(0, 0, "length_drift") not in logged[1]  # its baseline needs `window` updates
    summary = monitors.watcher.summary()
    gap = summary[key(None, 0, "train_eval_gap")]
    assert gap["threshold"] is None and gap["readings"] == 4 and gap["crossed_at_step"] is None
    # Baseline 12 tokens (the first 3 updates); past 0.5 from update 5 (20 tokens), and with
    # patience 2 it counts at update 6.
    assert summary[key(0, 0, "length_drift")]["crossed_at_step"] == 4 * 7
    assert monitors.stop_requested() is None  # nothing in stop_on
    record = monitors.summarize("completed")
    assert json.loads((tmp_path / SUMMARY_FILE).read_text()) == json.loads(json.dumps(record))
    assert sorted(record["crossed"]) == sorted(
        k for k, s in summary.items() if s["crossed_at_step"]
    )


def test_stop_on_asks_once_and_the_state_survives_a_checkpoint(tmp_path):
    t = _trainer(tmp_path, zero_variance_max=0.5, patience=1, stop_on=["zero_variance_fraction"])
    monitors = _monitors(t)
    t.monitors = monitors
    with pytest.warns(MonitorWarning, match="stop_on: the run checkpoints and stops"):
        for u in range(7):
            _drifting_update(monitors, u)
    assert "zero_variance_fraction (agent 0, turn 1)" in monitors.stop_requested()
    state = json.loads(json.dumps(monitors.state_dict()))  # plain data, as a checkpoint holds
    resumed = _monitors(t)
    resumed.load_state_dict(state)
    assert resumed.stop_requested() is None  # the crossing that stopped the run is history
    with warnings.catch_warnings():
        warnings.simplefilter("error", MonitorWarning)  # and it does not warn again
        _drifting_update(resumed, 7)
    assert resumed.length_baselines == monitors.length_baselines
    series = resumed.watcher.series[key(0, 0, "zero_variance_fraction")]
    assert series.count == 8 and series.crossed_at == 4 * 7


def test_zero_variance_reads_task_rewards_under_kl_shaping():
    tied = _group(0, 5, [1.0, 1.0, 1.0], 0.3)
    tied.kls = [0.1, 0.2, 0.3]  # the KL differs per completion: shaped rewards do not tie
    tied.rewards = [1.0 - 0.5 * k for k in tied.kls]
    spread = _group(0, 5, [0.0, 1.0, 1.0], 0.3)
    values = record_values([[tied, spread]], kl_coef=0.5)
    assert values[key(0, 0, "zero_variance_fraction")] == 0.5
    assert values[key(0, 0, "completion_length")] == 5.0
    assert values[key(0, 0, "kl")] == pytest.approx(sum(tied.kls + spread.kls) / 30)


def test_unwatched_steps_and_disabled_monitors_measure_nothing(tmp_path):
    t = _trainer(tmp_path, enabled=False)
    monitors = _monitors(t)
    assert monitors.watched_step([Target([], None, agent=0, turn=0)]) is None
    assert monitors.after_update([[_group(0, 3, [0.0, 1.0], 0.1)]], {"a": 1.0}, 1) == {"a": 1.0}
    assert monitors.summarize("completed") is None
    on = _monitors(_trainer(tmp_path))
    assert on.watched_step([Target([], None, agent=0)]) is None  # no turn: not a policy step
    assert on.watched_step([Target([], None, turn=0)]) is None  # a critic
    two = [Target([], None, agent=0, turn=0), Target([], None, agent=1, turn=0)]
    assert on.watched_step(two) is None  # a joint step (MADPO) is not one agent's


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"kl_mx": 1.0}, r"monitors: unknown key 'kl_mx' \(did you mean 'kl_max'\?\); valid:"),
        ({"entropy_min": -1}, r"monitors.entropy_min must be >= 0"),
        ({"clip_fraction_max": 1.5}, r"monitors.clip_fraction_max must be <= 1"),
        ({"kl_max": "high"}, r"monitors.kl_max must be a number"),
        ({"window": 1}, r"monitors.window must be >= 2"),
        ({"patience": 0}, r"monitors.patience must be >= 1"),
        ({"enabled": "yes"}, r"monitors.enabled must be true or false"),
        (
            {"stop_on": ["kl_drift"]},
            r"monitors.stop_on: unknown monitor 'kl_drift'; choose from kl",
        ),
        ({"stop_on": ["kl"]}, r"monitors.stop_on names 'kl', whose threshold monitors.kl_max"),
        ({"stop_on": 3}, r"monitors.stop_on must be a list of monitor names"),
    ],
)
def test_bad_monitor_settings_name_the_field_and_the_valid_values(settings, message):
    from comlrl.reinforce import MAGRPOConfig

    with pytest.raises(ValueError, match=message):
        MAGRPOConfig(monitors=settings)


def test_the_section_is_one_config_object_in_python_and_yaml():
    from comlrl.core.commands.launch import DEFAULT_RUN, algorithm_config
    from comlrl.core.config.run_file import check_run_file
    from comlrl.reinforce import MAGRPOConfig

    given = MonitorsConfig(kl_max=0.2, stop_on="kl")
    assert MAGRPOConfig(monitors=given).monitors.stop_on == ["kl"]
    assert MAGRPOConfig().monitors == MonitorsConfig()
    run = {**DEFAULT_RUN, "monitors": {"kl_max": 0.3, "stop_on": ["kl"]}}
    check_run_file(run, DEFAULT_RUN)
    config = algorithm_config(run, MAGRPOConfig, "magrpo")
    assert config.monitors.kl_max == 0.3 and config.monitors.stop_on == ["kl"]
    with pytest.raises(ValueError, match="run file: monitors has no key 'klmax'"):
        check_run_file({**DEFAULT_RUN, "monitors": {"klmax": 0.3}}, DEFAULT_RUN)
    clash = {**run, "magrpo": {**DEFAULT_RUN["magrpo"], "monitors": {"kl_max": 0.1}}}
    with pytest.raises(ValueError, match="monitors .* and magrpo.monitors .* disagree"):
        algorithm_config(clash, MAGRPOConfig, "magrpo")
