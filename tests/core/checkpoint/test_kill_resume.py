"""SIGKILL at 20 seeded instants of a run that checkpoints after every batch; each time a new
process resumes it. Every run that reaches its end equals the uninterrupted run bit for bit, and
its metrics.jsonl has no duplicated or missing step.

The kills land at named points of the checkpoint write (through the ``COMLRL_TEST_CHECKPOINT_KILL``
hook: before the owner file, inside the write, between publishing and moving ``latest``, while
rotating) and at random times. Each trial is a child forked from this process, which imported
torch once; a forked child is a new process, so a kill loses everything it held in memory.
"""

from __future__ import annotations

import os
import random
import signal
import time
import traceback

import pytest
import torch
from safetensors.torch import load_file, save_file

from comlrl.core.checkpoint.atomic import KILL_STAGES, TEST_KILL_ENV
from comlrl.core.checkpoint.layout import newest_complete
from tests.core.checkpoint.test_checkpoint_helpers import make_trainer, metrics

pytestmark = pytest.mark.xdist_group("test_kill_resume")

EPOCHS = 2  # 3 rollout batches per epoch: 6 checkpoints per uninterrupted run
KILLS = 20
SEED = 20261201


def _state_tensors(trainer) -> dict[str, torch.Tensor]:
    out = {}
    for i, model in enumerate(trainer.agents):
        for name, tensor in model.state_dict().items():
            out[f"agent{i}/{name}"] = tensor.detach().clone().contiguous()
    for i, opt in enumerate(trainer.optimizers):
        for pid, state in opt.state_dict()["state"].items():
            for key, value in state.items():
                if torch.is_tensor(value):
                    out[f"opt{i}/{pid}/{key}"] = value.detach().clone().contiguous()
    out["env_step"] = torch.tensor(trainer.env_step)
    return out


def _child(run_dir: str, kill: str | None, result: str) -> None:
    """Body of a forked trial: resume if a complete checkpoint exists, else start fresh."""
    torch.set_num_threads(1)  # a forked child must not reuse the parent's OpenMP pool
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    if kill:
        os.environ[TEST_KILL_ENV] = kill
    else:
        os.environ.pop(TEST_KILL_ENV, None)
    ckpt_dir = os.path.join(run_dir, "checkpoints")
    resume = "latest" if newest_complete(ckpt_dir) else None
    trainer = make_trainer(run_dir, EPOCHS)
    trainer.train(
        resume_from_checkpoint=resume,
        checkpoint_dir=ckpt_dir,
        checkpoint_every_batches=1,
        checkpoint_total_limit=2,
    )
    save_file(_state_tensors(trainer), result)


def _fork(run_dir: str, kill: str | None, result: str, log: str) -> int:
    pid = os.fork()
    if pid == 0:  # the child never returns into pytest
        code = 0
        try:
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            _child(run_dir, kill, result)
        except BaseException:
            with open(log, "a", encoding="utf-8") as fh:
                fh.write(traceback.format_exc())
            code = 1
        os._exit(code)
    return pid


def _wait(pid: int, delay: float | None) -> int:
    """Wait for the child (SIGKILL it after ``delay`` seconds if given); returns a signal number
    when it was killed, 0 when it finished, or fails the test when it crashed."""
    if delay is not None:
        deadline = time.monotonic() + delay
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.005)
        else:
            os.kill(pid, signal.SIGKILL)
            done, status = os.waitpid(pid, 0)
    else:
        done, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return os.WTERMSIG(status)
    return -1 if os.WEXITSTATUS(status) else 0


def test_twenty_kills_each_resumed_end_bitwise_equal(tmp_path):
    make_trainer(tmp_path / "warm", EPOCHS)  # imports and loads once here, not in every child
    log = str(tmp_path / "children.log")
    reference_dir = str(tmp_path / "reference")
    reference_file = str(tmp_path / "reference.safetensors")
    started = time.monotonic()
    status = _wait(_fork(reference_dir, None, reference_file, log), None)
    duration = time.monotonic() - started
    assert status == 0, open(log, encoding="utf-8").read()[-3000:]
    reference = load_file(reference_file)
    reference_metrics = metrics(reference_dir)
    steps = [r["step"] for r in reference_metrics if "turn_1/reward_mean" in r]
    assert len(steps) == 3 * EPOCHS

    rng = random.Random(SEED)
    kills: list[str] = []
    episodes = 0
    while len(kills) < KILLS:
        episode_dir = str(tmp_path / f"episode{episodes}")
        result = str(tmp_path / f"episode{episodes}.safetensors")
        finished = False
        while not finished:
            if len(kills) >= KILLS:
                kill, delay, label = None, None, "none"
            elif len(kills) % 2 == 0:
                pending = [s for s in KILL_STAGES if s not in kills]
                stage = pending[0] if pending else rng.choice(KILL_STAGES)
                kill, delay = f"{stage}:{rng.randint(1, 2)}", None
                label = stage
            else:
                kill, delay, label = None, rng.uniform(0.0, duration), "random"
            code = _wait(_fork(episode_dir, kill, result, log), delay)
            assert code in (0, signal.SIGKILL), open(log, encoding="utf-8").read()[-3000:]
            if code == signal.SIGKILL:
                kills.append(label)
            else:
                finished = True
        episodes += 1
        # The run that reached its end equals the uninterrupted one, bit for bit.
        final = load_file(result)
        assert final.keys() == reference.keys()
        for key, tensor in reference.items():
            assert torch.equal(final[key], tensor), f"episode {episodes}: {key} differs"
        records = metrics(episode_dir)
        assert records == reference_metrics
        train_steps = [r["step"] for r in records if "turn_1/reward_mean" in r]
        assert train_steps == steps and len(set(train_steps)) == len(train_steps)
        ckpt_dir = os.path.join(episode_dir, "checkpoints")
        assert not [n for n in os.listdir(ckpt_dir) if n.startswith(".")]  # no leftovers
    assert len(kills) >= KILLS
    # Every named point of the write was hit at least once (else the hook silently did nothing).
    assert set(KILL_STAGES) <= set(kills), kills
