"""The errors a new user meets on day one, through the ``comlrl`` command: each is one line with
exit status 2 that names the field (or package) and the fix, and is found before any model
loads. A bug inside the library is not shortened: it keeps its traceback."""

from __future__ import annotations

import json
import linecache
import sys

import pytest
import torch
import yaml

from comlrl.core.cli import main
from comlrl.core.errors import UserError, is_user_error
from comlrl.core.models import loading, tokenizers

HUB_TYPO = "Qwen/Qwen2.5-05B-Instruct"


def _no_model_loads(monkeypatch):
    """Any tokenizer or model load fails the test: the error must come first."""

    def loaded(*args, **kwargs):
        raise AssertionError("a tokenizer or model was loaded before the error")

    # Patched where they are looked up: the agents' loading and the CLI's tokenizer check.
    monkeypatch.setattr(loading, "resolve_tokenizers", loaded)
    monkeypatch.setattr(loading, "load_causal_lm", loaded)
    monkeypatch.setattr(tokenizers, "resolve_tokenizers", loaded)


def _not_on_the_hub(name, *args, **kwargs):
    # What transformers raises for a name that is neither a local folder nor a hub repo.
    raise OSError(
        f"{name} is not a local folder and is not a valid model identifier listed on "
        "'https://huggingface.co/models'\nIf this is a private repository, make sure to "
        "pass a token having permission to this repo."
    )


def _hub_typo(monkeypatch):
    import transformers

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", _not_on_the_hub)


def _critic_hub_typo(monkeypatch):
    import transformers

    monkeypatch.setattr(transformers.AutoModel, "from_pretrained", _not_on_the_hub)


def _without(package):
    def setup(monkeypatch):
        monkeypatch.setitem(sys.modules, package, None)  # as if it were not installed
        # Submodules an earlier test imported would still resolve; an absent package has none.
        for name in [m for m in sys.modules if m.startswith(package + ".")]:
            monkeypatch.delitem(sys.modules, name)
        _no_model_loads(monkeypatch)

    return setup


def _metrics_run(tmp_path):
    run = tmp_path / "plotted"
    run.mkdir()
    (run / "metrics.jsonl").write_text(json.dumps({"step": 1, "turn_1/reward_mean": 0.5}) + "\n")
    return str(run)


def _magrpo_run_file(tmp_path):
    path = tmp_path / "magrpo_run.yaml"
    path.write_text(
        yaml.safe_dump(
            {"algorithm": "magrpo", "magrpo": {"num_generations": 2, "epsilon": 0.2, "top_k": 5}}
        )
    )
    return str(path)


# (case id, argv (a callable of tmp_path for paths), setup, texts the one line must contain)
CASES = [
    (
        "mistyped hub id",
        ["train", "--set", f"agent_model.name={HUB_TYPO}"],
        _hub_typo,
        ["agent_model", HUB_TYPO, "hub id", "huggingface-cli login"],
    ),
    (
        "mistyped critic hub id",
        ["train", "--algo", "iac", "--set", f"critic_model.name={HUB_TYPO}"],
        _critic_hub_typo,
        ["critic", HUB_TYPO, "hub id"],
    ),
    (
        "missing local model dir",
        ["train", "--set", "agent_model.name=./models/no-such-dir"],
        _no_model_loads,
        ["agent_model", "./models/no-such-dir", "does not exist", "config.json"],
    ),
    (
        "tensorboard not installed",
        ["train", "--set", "magrpo.report_to=[tensorboard]"],
        _without("tensorboard"),
        ["report_to: [tensorboard]", "pip install 'comlrl-core[tensorboard]'"],
    ),
    (
        "wandb not installed",
        ["train", "--set", "magrpo.report_to=wandb"],
        _without("wandb"),
        ["report_to: [wandb]", "pip install 'comlrl-core[wandb]'"],
    ),
    (
        "peft not installed",
        ["train", "--set", "magrpo.peft_config={r: 4}"],
        _without("peft"),
        ["peft_config", "pip install 'comlrl-core[peft]'"],
    ),
    (
        "matplotlib not installed",
        lambda tmp: ["plot", _metrics_run(tmp)],
        _without("matplotlib"),
        ["comlrl plot", "pip install 'comlrl-core[plot]'"],
    ),
    (
        "--override without =",
        ["train", "--override", "seed"],
        None,
        ["--override expects key=value", "'seed'"],
    ),
    (
        "--set without =",
        ["train", "--set", "seed"],
        None,
        ["--set expects key=value"],
    ),
    (
        "--override into a non-section",
        ["train", "--override", "seed.value=1"],
        None,
        ["--override seed.value", "not a section"],
    ),
    (
        "--algo drops run-file fields",
        lambda tmp: ["train", "--config", _magrpo_run_file(tmp), "--algo", "madpo"],
        _no_model_loads,
        ["--algo madpo", "epsilon, num_generations", "remove them"],
    ),
]


@pytest.mark.parametrize("argv, setup, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_day_one_error_is_one_line_with_the_fix(
    tmp_path, monkeypatch, capsys, argv, setup, expected
):
    monkeypatch.chdir(tmp_path)
    if setup is not None:
        setup(monkeypatch)
    argv = argv(tmp_path) if callable(argv) else argv
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("comlrl")]
    assert len(lines) == 1 and lines[0].startswith("comlrl: error: "), err
    assert "Traceback" not in err
    for text in expected:
        assert text in lines[0], (text, lines[0])
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())


def test_eval_override_leaves_the_run_positional(tmp_path, monkeypatch):
    from comlrl.core.commands import eval as evaluation

    seen = {}

    def capture(paths, agents):
        seen["paths"] = list(paths)
        raise UserError("stop here")

    monkeypatch.setattr(evaluation, "resolve_sources", capture)
    assert main(["eval", "--override", "seed=1", "dataset.eval_limit=2", "runs/mine"]) == 2
    assert seen["paths"] == ["runs/mine"]
    assert main(["eval", "runs/mine", "--override", "seed=1"]) == 2
    assert seen["paths"] == ["runs/mine"]


def test_eval_override_values_still_apply(tmp_path, monkeypatch):
    from comlrl.core.commands import eval as evaluation

    seen = {}

    def capture(run, agents, split, limit):
        seen["run"] = run
        raise UserError("stop here")

    monkeypatch.setattr(evaluation, "resolve_sources", lambda paths, agents: (None, ["a"]))
    monkeypatch.setattr(evaluation, "eval_run_file", capture)
    assert main(["eval", "--override", "seed=5", "magrpo.num_turns=2", "some/agent"]) == 2
    assert seen["run"]["seed"] == 5 and seen["run"]["magrpo"]["num_turns"] == 2


def test_algo_switch_from_the_defaults_drops_their_fields_silently(monkeypatch):
    from comlrl.core.cli import _switch_algorithm
    from comlrl.core.commands.launch import DEFAULT_RUN

    run = _switch_algorithm(dict(DEFAULT_RUN), "madpo")
    assert run["algorithm"] == "madpo" and "num_generations" not in run["madpo"]
    assert "magrpo" not in run


def test_a_library_bug_keeps_its_traceback(tmp_path, monkeypatch):
    from comlrl.core.commands import launch

    def buggy(run, run_dir):
        # A ValueError out of torch: a shape mix-up inside library code, not a setting.
        torch.nn.functional.cross_entropy(torch.zeros(2, 3), torch.zeros(4, dtype=torch.long))

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(launch, "build_trainer", buggy)
    with pytest.raises(ValueError, match="batch_size"):
        main(["train"])  # no --debug: the exception itself comes out, traceback and all


def _comlrl_function(source: str):
    """A function compiled as if it lived in a comlrl module (its source in linecache)."""
    filename = "<comlrl-core-test-module>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"__name__": "comlrl.core.fake_module", "UserError": UserError}
    exec(compile(source, filename, "exec"), namespace)
    return namespace["f"]


@pytest.mark.parametrize(
    "source, user",
    [
        ("def f():\n    raise ValueError('x: must be >= 1, got 0.')\n", True),
        ("def f():\n    a, b = [1, 2, 3]\n", False),  # the interpreter's ValueError: a bug
        ("def f():\n    int('three')\n", False),  # a builtin's ValueError: a bug
        ("def f():\n    raise UserError('anything')\n", True),
        ("def f():\n    raise ImportError('No module named x')\n", False),
        ("def f():\n    raise RuntimeError('x')\n", False),
    ],
)
def test_which_errors_count_as_the_users(source, user):
    func = _comlrl_function(source)
    with pytest.raises(Exception) as caught:
        func()
    assert is_user_error(caught.value) is user


@pytest.mark.parametrize("package, sink", [("tensorboard", "tensorboard"), ("wandb", "wandb")])
def test_python_api_reports_a_missing_sink_package_before_loading(monkeypatch, package, sink):
    from comlrl.core.errors import MissingPackageError
    from comlrl.core.testing import tiny_model_dir
    from comlrl.reinforce import MAGRPOConfig, MAGRPOTrainer

    agent = tiny_model_dir()  # built before the package goes missing
    _without(package)(monkeypatch)
    with pytest.raises(MissingPackageError, match=rf"pip install 'comlrl-core\[{package}\]'"):
        MAGRPOTrainer(
            agent_model=agent,
            num_agents=2,
            train_dataset=[{"prompt": "Write a story."}],
            reward_func=lambda completions, **kw: [0.0] * len(completions),
            args=MAGRPOConfig(report_to=[sink], num_generations=2),
        )
