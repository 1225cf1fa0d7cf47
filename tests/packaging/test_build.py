"""Each member builds alone, and core + reinforce wheels alone train a tiny MAGRPO run."""

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ["comlrl-core", "comlrl-reinforce", "comlrl-ac", "comlrl-pbrl", "comlrl-tasks", "comlrl"]


def _uv():
    exe = shutil.which("uv")
    assert exe, "uv must be on PATH (pip install uv)"
    return exe


def _env():
    env = dict(os.environ)
    env.setdefault("UV_PYTHON_DOWNLOADS", "never")
    env.pop("VIRTUAL_ENV", None)
    return env


@pytest.fixture(scope="module")
def wheels(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    for name in PACKAGES:
        proc = subprocess.run(
            [_uv(), "build", "--package", name, "--wheel", "--out-dir", str(out)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            env=_env(),
            timeout=600,
        )
        assert proc.returncode == 0, f"{name}: {proc.stderr[-2000:]}"
    return out


def test_each_member_builds_alone(wheels):
    built = sorted(p.name for p in wheels.glob("*.whl"))
    for name in PACKAGES:
        prefix = name.replace("-", "_") + "-"
        assert any(b.startswith(prefix) for b in built), (name, built)


SCRIPT = textwrap.dedent("""
    import importlib.util, sys
    import comlrl.reinforce, comlrl.trainers.reinforce
    from comlrl.trainers.reinforce import MAGRPOConfig, MAGRPOTrainer
    assert importlib.util.find_spec("comlrl.ac") is None
    assert importlib.util.find_spec("comlrl.tasks") is None
    from comlrl.core.testing import tiny_pair
    m, tok = tiny_pair()
    t = MAGRPOTrainer(agents=[m, m], tokenizer=tok,
                      train_dataset=[{"prompt": "Write a story about a cat."}] * 2,
                      reward_func=lambda a, b: [float(len(y) - len(x)) for x, y in zip(a, b)],
                      args=MAGRPOConfig(num_train_epochs=1, num_generations=2, max_new_tokens=6,
                                        num_turns=1, eval_interval=0, output_dir=sys.argv[1]))
    t.train()
    print("ENV_STEP", t.env_step)
""")


def test_core_and_reinforce_wheels_alone_train(wheels, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run(
        [_uv(), "venv", str(venv), "--python", sys.executable],
        check=True,
        capture_output=True,
        env=_env(),
        timeout=300,
    )
    py = venv / "bin" / "python"
    picks = [str(next(wheels.glob(f"{n}-*.whl"))) for n in ("comlrl_core", "comlrl_reinforce")]
    proc = subprocess.run(
        [_uv(), "pip", "install", "--python", str(py), *picks],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    env = _env()
    env.update(HF_HUB_OFFLINE="1", WANDB_MODE="disabled")
    run = subprocess.run(
        [str(py), str(script), str(tmp_path / "run")],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "ENV_STEP 4" in run.stdout
    assert (tmp_path / "run" / "metrics.jsonl").exists()
