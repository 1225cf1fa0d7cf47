"""The actor-critic family reports the reward-hacking monitors from core's record and steps,
with a separate critic and with a value head on the actor (whose forward scores the actor)."""

import pytest

from comlrl.core.logging.jsonl import read_metrics

from .helpers import make_iac


@pytest.mark.parametrize("separate", [True, False])
def test_iac_logs_entropy_clip_fraction_and_record_monitors_per_agent_and_turn(tmp_path, separate):
    trainer = make_iac(tmp_path, separate=separate, policy_loss="ppo", num_iterations=2)
    trainer.train()
    logged = set().union(*read_metrics(trainer.reporting.run_dir + "/metrics.jsonl"))
    for agent in (0, 1):
        for name in ("entropy", "clip_fraction", "completion_length", "zero_variance_fraction"):
            assert f"monitors/agent_{agent}/turn_1/{name}" in logged, name
