"""`min_p`, `repetition_penalty` and `max_prompt_length`: each reaches sampling from Python, a
run file and ``comlrl train --set``, and a bad value is one CLI line naming the field."""

from __future__ import annotations

import warnings

import pytest
import yaml

from comlrl.core import cli
from comlrl.core.cli import main
from comlrl.core.launch import algorithm_config
from comlrl.core.rollout.generation import SamplingParams, truncate_prompt_ids
from comlrl.reinforce import MAGRPOConfig
from tests.reinforce.helpers import make_trainer

# field, a valid value, what it makes of the sampler's settings, a bad value and its valid range
KNOBS = [
    ("min_p", 0.1, lambda p: p.generate_kwargs().get("min_p") == 0.1, 1.5, "<= 1.0"),
    (
        "repetition_penalty",
        1.3,
        lambda p: p.generate_kwargs().get("repetition_penalty") == 1.3,
        -1.0,
        "> 0.0",
    ),
    ("max_prompt_length", 3, lambda p: p.max_prompt_length == 3, 0, ">= 1"),
]


def _sampling(args) -> SamplingParams:
    from comlrl.core.rollout.steps import RolloutSteps

    holder = RolloutSteps()
    holder.args = args
    return holder.sampling_params()


@pytest.mark.parametrize("field, value, reached, bad, valid", KNOBS, ids=[k[0] for k in KNOBS])
def test_python_run_file_and_set_reach_the_sampler(
    tmp_path, monkeypatch, field, value, reached, bad, valid
):
    assert reached(_sampling(MAGRPOConfig(**{field: value})))
    assert not reached(_sampling(MAGRPOConfig()))  # the default leaves the sampler alone

    run = {"algorithm": "magrpo", "magrpo": {field: value}}
    assert reached(_sampling(algorithm_config(run, MAGRPOConfig, "magrpo")))

    seen = {}

    def capture(run, resume=None):
        seen["args"] = algorithm_config(run, MAGRPOConfig, "magrpo")
        return str(tmp_path / "run")

    monkeypatch.setattr(cli, "run_training", capture)
    run_file = tmp_path / "run.yaml"
    run_file.write_text(yaml.safe_dump(run))
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--config", str(run_file)]) == 0
    assert reached(_sampling(seen.pop("args")))
    assert main(["train", "--set", f"magrpo.{field}={value}"]) == 0
    assert reached(_sampling(seen.pop("args")))


@pytest.mark.parametrize("field, value, reached, bad, valid", KNOBS, ids=[k[0] for k in KNOBS])
def test_a_bad_value_is_one_line_naming_the_field(
    tmp_path, monkeypatch, capsys, field, value, reached, bad, valid
):
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--set", f"magrpo.{field}={bad}"]) == 2
    lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("comlrl")]
    assert len(lines) == 1, lines
    assert field in lines[0] and valid in lines[0], lines[0]


def test_long_prompts_lose_their_first_tokens_with_one_counting_warning():
    with pytest.warns(UserWarning, match=r"2 of 3 prompts .*max_prompt_length=3.*longest: 5"):
        cut = truncate_prompt_ids([[1, 2, 3, 4, 5], [6, 7], [8, 9, 10, 11]], 3)
    assert cut == [[3, 4, 5], [6, 7], [9, 10, 11]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert truncate_prompt_ids([[1, 2]], 3) == [[1, 2]]


def test_a_run_samples_from_truncated_prompts_with_the_penalties(tmp_path):
    trainer = make_trainer(
        tmp_path, max_prompt_length=3, min_p=0.05, repetition_penalty=1.2, num_train_epochs=1
    )
    backend = trainer.rollout_backend
    seen = []
    generate_ids = backend.generate_ids

    def recording(agent, prompt_ids, n, params, seeds=None):
        seen.append(([len(x) for x in prompt_ids], params.generate_kwargs()))
        return generate_ids(agent, prompt_ids, n, params, seeds)

    backend.generate_ids = recording
    with pytest.warns(UserWarning, match="max_prompt_length=3"):
        trainer.train()
    assert seen and all(max(lengths) <= 3 for lengths, _ in seen)
    assert all(k["min_p"] == 0.05 and k["repetition_penalty"] == 1.2 for _, k in seen)
