"""Learning rates written as ``1e-5`` are numbers in run files and ``--set`` overrides (YAML
1.1, which PyYAML follows, would read them as strings); other scalars read as before."""

import pytest

from comlrl.core.config.yaml_io import load_yaml, parse_override


@pytest.mark.parametrize(
    "text, value",
    [("1e-4", 1e-4), ("3e-3", 3e-3), ("+1e5", 1e5), ("1.0e-5", 1e-5), (".5", 0.5), ("2", 2),
     ("-3", -3), ("0x10", 16), ("true", True), ("1e", "1e"), ("1.2.3", "1.2.3"), ("abc", "abc")],
)  # fmt: skip
def test_override_values(text, value):
    _, got = parse_override(f"magrpo.agent_learning_rate={text}")
    assert got == value and type(got) is type(value)


def test_run_file_learning_rates_are_floats(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(
        "magrpo:\n  agent_learning_rate: 1e-5\n  num_generations: 4\n  betas: [9e-1, 2]\n"
    )
    section = load_yaml(str(path))["magrpo"]
    assert section == {"agent_learning_rate": 1e-5, "num_generations": 4, "betas": [0.9, 2]}
    assert isinstance(section["num_generations"], int)
