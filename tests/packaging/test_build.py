"""Each package builds alone (sdist, and the wheel from it), the artifacts hold what they should,
and core + reinforce wheels alone train a tiny MAGRPO run."""

import os
import shutil
import subprocess
import sys
import tarfile
import textwrap
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.requirements import Requirement

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
            # Without --wheel, uv builds the sdist and then the wheel from the unpacked sdist,
            # so a wheel here also proves the sdist is complete.
            [_uv(), "build", "--package", name, "--out-dir", str(out)],
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


def _artifact(wheels, name, suffix):
    return next(wheels.glob(f"{name.replace('-', '_')}-*{suffix}"))


def _metadata(wheel):
    with zipfile.ZipFile(wheel) as zf:
        path = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        return Parser().parsestr(zf.read(path).decode())


def _wheel_files(wheel):
    with zipfile.ZipFile(wheel) as zf:
        return {n for n in zf.namelist() if ".dist-info/" not in n}


# Files every sdist may carry besides its sources (hatch always adds the VCS ignore file).
SDIST_EXTRAS = {"pyproject.toml", "PKG-INFO", "README.md", "CHANGELOG.md", "LICENSE", ".gitignore"}


def test_sdists_hold_only_their_own_files(wheels):
    for name in PACKAGES:
        with tarfile.open(_artifact(wheels, name, ".tar.gz")) as tf:
            files = [m.name.split("/", 1)[1] for m in tf.getmembers() if m.isfile()]
        sources = {f.removeprefix("src/") for f in files if f not in SDIST_EXTRAS}
        # The sources are exactly what the wheel installs: no tests, lock or other members.
        assert sources == _wheel_files(_artifact(wheels, name, ".whl")), name
        assert not any(f.startswith(("packages/", "tests/", "benchmarks/")) for f in files), name
        assert "uv.lock" not in files, name


def test_only_core_installs_the_namespace_init(wheels):
    for name in PACKAGES:
        has_init = "comlrl/__init__.py" in _wheel_files(_artifact(wheels, name, ".whl"))
        assert has_init == (name == "comlrl-core"), name


def test_meta_package_brings_wandb_and_members_keep_it_optional(wheels):
    def requires(name):
        return [
            Requirement(r)
            for r in _metadata(_artifact(wheels, name, ".whl")).get_all("Requires-Dist", [])
        ]

    meta = [r for r in requires("comlrl") if r.marker is None]
    assert any(r.name == "comlrl-core" and "wandb" in r.extras for r in meta), meta
    assert {r.name for r in meta} >= set(PACKAGES[:-1])
    for name in PACKAGES[:-1]:
        for req in requires(name):
            if req.name == "wandb" or "wandb" in req.extras:
                assert req.marker is not None and "extra" in str(req.marker), (name, req)


def test_every_artifact_has_a_release_version(wheels):
    from packaging.version import Version

    for name in PACKAGES:
        version = Version(_metadata(_artifact(wheels, name, ".whl"))["Version"])
        assert not (version.is_prerelease or version.is_devrelease), (name, version)


SCRIPT = textwrap.dedent("""
    import importlib.metadata, importlib.util, sys
    import comlrl
    assert comlrl.__version__ == importlib.metadata.version("comlrl-core"), comlrl.__version__
    import comlrl.reinforce, comlrl.trainers.reinforce
    from comlrl.trainers.reinforce import MAGRPOConfig, MAGRPOTrainer
    # 1.4.3's submodule paths ship with their family and core, not with the meta-package.
    from comlrl.trainers.reinforce.magrpo import MAGRPOConfig as Same, NodeSample
    from comlrl.trainers.reinforce.marloo import MARLOOTrainer
    from comlrl.utils.checkpoint import read_checkpoint_metadata
    from comlrl.schedulers import DeviceScheduler
    assert Same is MAGRPOConfig
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
