"""Stopping a run: SIGTERM writes a checkpoint and returns; SIGKILL in the middle of a save
leaves the previous checkpoint intact and ``latest`` pointing at it. Both runs resume to the
same result as an uninterrupted run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from comlrl.core.checkpoint.atomic import TEST_DELAY_ENV
from comlrl.core.checkpoint.layout import list_checkpoints, read_latest
from comlrl.core.checkpoint.reader import CheckpointReader, read_checkpoint_metadata
from tests.core.checkpoint.test_checkpoint_helpers import (
    assert_same_state,
    make_trainer,
    metrics,
    reward,
)

# One worker runs the whole module, so the module fixture is built once.
pytestmark = pytest.mark.xdist_group("test_resume_signals")


REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("uninterrupted")
    trainer = make_trainer(run_dir, 2)
    trainer.train()
    return trainer, metrics(run_dir)


def test_sigterm_writes_a_checkpoint_and_the_run_resumes(tmp_path, uninterrupted):
    assert threading.current_thread() is threading.main_thread(), "signals need the main thread"
    reference, reference_metrics = uninterrupted
    ckpt_dir = tmp_path / "checkpoints"
    calls = {"n": 0}

    def reward_then_sigterm(c1, c2):
        if len(c1) == 4:  # training batches only
            calls["n"] += 1
            if calls["n"] == 5:  # second batch of epoch 2
                os.kill(os.getpid(), signal.SIGTERM)
        return reward(c1, c2)

    before = signal.getsignal(signal.SIGTERM)
    first = make_trainer(tmp_path, 2, reward_func=reward_then_sigterm)
    first.train(checkpoint_dir=str(ckpt_dir))  # no mid-epoch saves: only the signal makes one
    assert first.run_state.interrupted and not first.run_state.training_complete
    assert signal.getsignal(signal.SIGTERM) is before
    meta = read_checkpoint_metadata(first.run_state.last_checkpoint)
    assert (meta["reason"], meta["epoch"], meta["position"]) == ("signal", 1, 4)
    assert read_latest(str(ckpt_dir)) == first.run_state.last_checkpoint

    second = make_trainer(tmp_path, 2)
    second.train(resume_from_checkpoint="latest", checkpoint_dir=str(ckpt_dir))
    assert not second.run_state.interrupted
    assert_same_state(reference, second)
    assert metrics(tmp_path) == reference_metrics


_CHILD = textwrap.dedent(
    """
    import sys
    from tests.core.checkpoint.test_checkpoint_helpers import make_trainer

    run_dir, ckpt_dir = sys.argv[1], sys.argv[2]
    trainer = make_trainer(run_dir, 2)
    trainer.train(checkpoint_dir=ckpt_dir, checkpoint_every_batches=1)
    print("training finished without being killed")
    """
)


def _wait_for_pause(proc, ckpt_dir: str, limit_s: float = 900.0) -> str:
    """Poll until the child sits inside checkpoint 3's write (the test hook's PAUSED marker)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the child exited ({proc.returncode}) before pausing:\n{out}\n{err}")
        if os.path.isdir(ckpt_dir):
            for name in os.listdir(ckpt_dir):
                staging = os.path.join(ckpt_dir, name)
                if name.startswith(".staging-checkpoint-3-") and os.path.exists(
                    os.path.join(staging, "PAUSED")
                ):
                    return staging
        time.sleep(0.2)
    proc.kill()
    pytest.fail("the child never reached the paused checkpoint write")


def test_sigkill_during_a_save_leaves_the_previous_checkpoint(tmp_path, uninterrupted):
    reference, reference_metrics = uninterrupted
    run_dir, ckpt_dir = str(tmp_path), str(tmp_path / "checkpoints")
    env = dict(os.environ, PYTHONPATH=REPO, OMP_NUM_THREADS="1")
    env[TEST_DELAY_ENV] = "600@3"  # pause inside the third save (the end of epoch 1)
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, run_dir, ckpt_dir],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    staging = _wait_for_pause(proc, ckpt_dir)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL

    # The half-written checkpoint is only a hidden staging dir; latest names the complete one.
    assert os.path.isdir(staging) and not os.path.exists(os.path.join(staging, "manifest.json"))
    assert [seq for seq, _ in list_checkpoints(ckpt_dir)] == [1, 2]
    latest = read_latest(ckpt_dir)
    assert latest == os.path.join(ckpt_dir, "checkpoint-2")
    assert CheckpointReader(latest).cursor == (0, 4)  # mid-epoch: after 2 of 3 batches

    resumed = make_trainer(run_dir, 2)
    resumed.train(resume_from_checkpoint="latest", checkpoint_dir=ckpt_dir)
    assert not os.path.exists(staging)  # the killed save's leftovers are cleaned up
    assert_same_state(reference, resumed)
    assert metrics(run_dir) == reference_metrics
