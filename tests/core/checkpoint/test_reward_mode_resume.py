"""A reward call mode that ``auto`` settled on is part of the run: a resumed run does not probe
the reward function again (a stateful reward function sees the same calls as without the
interruption)."""

import glob
import os

from comlrl.core.rewards.caller import RewardCaller
from tests.core.checkpoint.test_checkpoint_helpers import make_trainer, reward


class CountingReward:
    """The helpers' reward, counting its calls in checkpointed state."""

    def __init__(self):
        self.calls = 0

    def __call__(self, completions1, completions2):
        self.calls += 1
        return reward(completions1, completions2)

    def state_dict(self):
        return {"calls": self.calls}

    def load_state_dict(self, state):
        self.calls = int(state["calls"])


def _trainer(run_dir, func):
    # One item of K=2 per batch: two joint actions of two agents, which "auto" cannot tell
    # from one joint action's per-agent values without scoring the first one alone.
    return make_trainer(run_dir, 2, reward_func=func, rollout_batch_size=1, eval_interval=0)


def test_a_resumed_run_keeps_the_settled_call_mode(tmp_path):
    full_reward = CountingReward()
    full = _trainer(tmp_path / "run", full_reward)
    full.train(checkpoint_dir=str(tmp_path / "ckpt"), checkpoint_every_batches=1)
    assert full.reward_caller.call_mode == "batch"
    points = sorted(glob.glob(os.path.join(tmp_path / "ckpt", "checkpoint-*")))
    middle = points[len(points) // 2]
    resumed_reward = CountingReward()
    resumed = _trainer(tmp_path / "run", resumed_reward)
    resumed.train(resume_from_checkpoint=middle)
    assert resumed.reward_caller.call_mode == "batch"
    assert resumed_reward.calls == full_reward.calls


def test_only_an_undecided_caller_takes_a_saved_mode():
    caller = RewardCaller(reward, num_agents=2)
    caller.restore_mode("per_sample")
    assert caller.call_mode == "per_sample"
    fixed = RewardCaller(reward, num_agents=2, call_mode="batch")
    fixed.restore_mode("per_sample")
    assert fixed.call_mode == "batch"
