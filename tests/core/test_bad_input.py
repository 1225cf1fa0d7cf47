"""Bad input gets a ValueError raised by us that names the culprit (issue 15, section 3).

One table: each case builds the bad input, and the test asserts the exception type and that the
message names the field, file or function (and, where there is one, what would be valid).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from comlrl.ac import IACConfig, IACTrainer
from comlrl.core.commands.launch import DEFAULT_RUN, checkpoint_settings, run_training
from comlrl.core.config.run_file import CheckpointSection, WandbSection, check_run_file, field_names
from comlrl.core.config.yaml_io import load_yaml
from comlrl.core.logging.wandb_sink import _INIT_KEYS
from comlrl.core.plugins import available_tasks, load_task
from comlrl.core.rollout.formatters import build_formatters
from comlrl.core.rollout.generation import PromptSamples
from comlrl.core.rollout.tree import TreeSettings, build_trees
from comlrl.core.testing import tiny_pair
from comlrl.pbrl import MADPOConfig, MADPOTrainer
from comlrl.reinforce import MAGRPOConfig, MAGRPOTrainer

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ROWS = [{"prompt": "Write a story about a cat."}, {"prompt": "Write a story about the sea."}]
FAST = dict(num_train_epochs=1, max_new_tokens=4, eval_interval=0, logging_steps=1, seed=0)


def reward(a, b):
    return [float(len(x) + len(y)) for x, y in zip(a, b)]


def magrpo(ctx, **kwargs):
    """A MAGRPO trainer on ``ctx``'s tiny model dir; keywords replace the defaults."""
    cfg = dict(FAST, num_generations=2, num_turns=1, rollout_buffer_size=2)
    cfg["output_dir"] = str(ctx.tmp / "run")
    cfg.update(kwargs.pop("cfg", {}))
    base = dict(
        agent_model=ctx.tiny_dir, train_dataset=ROWS, reward_func=reward, args=MAGRPOConfig(**cfg)
    )
    base.update(kwargs)
    return MAGRPOTrainer(**base)


def madpo(ctx, **kwargs):
    cfg = dict(FAST, preference_num_candidates=2, output_dir=str(ctx.tmp / "run"))
    base = dict(
        agent_model=ctx.tiny_dir, train_dataset=ROWS, reward_func=reward, args=MADPOConfig(**cfg)
    )
    base.update(kwargs)
    return MADPOTrainer(**base)


def model_copy(ctx, name: str) -> str:
    """A copy of the tiny model dir that the case may damage."""
    target = ctx.tmp / name
    shutil.copytree(ctx.tiny_dir, target)
    return str(target)


def truncated_weights(ctx):
    path = model_copy(ctx, "cut")
    weights = os.path.join(path, "model.safetensors")
    with open(weights, "r+b") as fh:
        fh.truncate(os.path.getsize(weights) // 2)
    magrpo(ctx, agent_model=path)


def broken_config(ctx):
    path = model_copy(ctx, "broken")
    with open(os.path.join(path, "config.json"), "w") as fh:
        fh.write('{\n  "model_type": "qwen2",\n  "hidden_size": 64,,\n}\n')
    magrpo(ctx, agent_model=path)


def missing_critic(ctx):
    m0, tok = tiny_pair(seed=0)
    m1, _ = tiny_pair(seed=1)
    cfg = dict(FAST, num_generations=2, num_turns=1, output_dir=str(ctx.tmp / "run"))
    IACTrainer(
        agents=[m0, m1],
        tokenizer=tok,
        critic_model=str(ctx.tmp / "no_critic"),
        train_dataset=ROWS,
        reward_func=reward,
        args=IACConfig(**cfg),
    )


def empty_model_dir(ctx):
    (ctx.tmp / "empty").mkdir()
    magrpo(ctx, agent_model=str(ctx.tmp / "empty"))


def two_agents_three_requested(trainer):
    def case(ctx):
        m0, tok = tiny_pair(seed=0)
        m1, _ = tiny_pair(seed=1)
        trainer(ctx, agent_model=None, agents=[m0, m1], tokenizer=tok, num_agents=3)

    return case


def big_tokenizer(ctx):
    m0, tok = tiny_pair(seed=0)
    m1, _ = tiny_pair(seed=1)
    tok.add_tokens(["<extra_a>", "<extra_b>"])  # the embeddings are not resized
    magrpo(ctx, agent_model=None, agents=[m0, m1], tokenizer=tok)


def unknown_generate_keyword(trainer):
    def case(ctx):
        m0, tok = tiny_pair(seed=0)
        m1, _ = tiny_pair(seed=1)
        built = trainer(ctx, agent_model=None, agents=[m0, m1], tokenizer=tok)
        built.train(temprature=0.3)

    return case


def output_dir_is_a_file(ctx):
    (ctx.tmp / "taken").write_text("not a directory")
    magrpo(ctx, cfg={"output_dir": str(ctx.tmp / "taken")})


def missing_gpu(ctx):
    missing = f"cuda:{torch.cuda.device_count() if torch.cuda.is_available() else 7}"
    magrpo(ctx, cfg={"agent_devices": missing})


def fake_generate(num_samples: int):
    def generate(prompts_per_agent):
        return [
            [PromptSamples(p, [1], [[2]] * num_samples, ["ok"] * num_samples) for p in prompts]
            for prompts in prompts_per_agent
        ]

    return generate


def numbers_as_prompts(**kw):
    return [1, None]


def transition_returns_non_strings(ctx):
    build_trees(
        ROWS[:1],
        TreeSettings(num_agents=2, num_turns=2, num_samples=2),
        build_formatters(None, 2),
        fake_generate(2),
        lambda completions, **kw: [0.0] * len(completions[0]),
        numbers_as_prompts,
    )


def write(ctx, name: str, text: str) -> str:
    path = ctx.tmp / name
    path.write_text(text)
    return str(path)


def run_with(**sections):
    """A run over the defaults that never leaves ``base_dir`` unset to the cwd."""
    return {**DEFAULT_RUN, **sections}


def train_run(run_sections: dict):
    """Call run_training and also check that the refused run left no run directory behind."""

    def case(ctx):
        output = {**DEFAULT_RUN["output"], **run_sections.get("output", {})}
        output.update(base_dir=str(ctx.tmp / "runs"), run_name="r")
        try:
            run_training(run_with(**{**run_sections, "output": output}))
        finally:
            assert not (ctx.tmp / "runs").exists()

    return case


@dataclass
class Case:
    name: str
    action: Callable
    names: tuple[str, ...]  # substrings the message must hold
    exc: type[BaseException] = ValueError


CASES = [
    # datasets
    Case("empty dataset", lambda c: magrpo(c, train_dataset=[]), ("train_dataset", "empty")),
    Case(
        "rows without prompt",
        lambda c: magrpo(c, train_dataset=[ROWS[0], {"question": "q"}]),
        ("train_dataset[1]", "'prompt'", "formatters="),
    ),
    Case(
        "generator dataset",
        lambda c: magrpo(c, train_dataset=(r for r in ROWS)),
        ("train_dataset", "generator", "list"),
    ),
    Case(
        "list of strings",
        lambda c: magrpo(c, train_dataset=["a story", "a poem"]),
        ("train_dataset[0]", "str", "dict"),
    ),
    Case("empty eval dataset", lambda c: magrpo(c, eval_dataset=[]), ("eval_dataset", "empty")),
    # model paths
    Case(
        "missing model path",
        lambda c: magrpo(c, agent_model=str(c.tmp / "nowhere")),
        ("agent_model", "nowhere", "does not exist", "hub id"),
    ),
    Case("missing critic path", missing_critic, ("critic", "no_critic", "does not exist")),
    Case("empty model dir", empty_model_dir, ("agent_model", "empty", "config.json")),
    Case("broken config.json", broken_config, ("config.json", "broken", "line 3")),
    Case("truncated weights", truncated_weights, ("model.safetensors", "cut", "truncated")),
    # agents and devices
    Case(
        "MAGRPO: two agents, num_agents=3",
        two_agents_three_requested(magrpo),
        ("num_agents=3", "2 model(s)"),
    ),
    Case(
        "MADPO: two agents, num_agents=3",
        two_agents_three_requested(madpo),
        ("num_agents=3", "2 model(s)"),
    ),
    Case(
        "unknown dtype",
        lambda c: magrpo(c, model_config={"torch_dtype": "bfloat17"}),
        ("model_config.torch_dtype", "bfloat17", "bfloat16"),
    ),
    Case("tokenizer larger than embedding", big_tokenizer, ("agent 0", "322 tokens", "320 rows")),
    Case(
        "MAGRPO: unknown generate keyword",
        unknown_generate_keyword(magrpo),
        ("train()", "temprature", "did you mean 'temperature'"),
    ),
    Case(
        "MADPO: unknown generate keyword",
        unknown_generate_keyword(madpo),
        ("train()", "temprature", "did you mean 'temperature'"),
    ),
    Case("output_dir is a file", output_dir_is_a_file, ("args.output_dir", "taken", "directory")),
    Case("missing GPU", missing_gpu, ("agent_devices", "cuda:", "not available", "'cpu'")),
    Case(
        "transition returns non-strings",
        transition_returns_non_strings,
        ("numbers_as_prompts", "entry 0", "int", "list of 2 strings"),
    ),
    # YAML run files
    Case(
        "malformed YAML",
        lambda c: load_yaml(write(c, "bad.yaml", "magrpo:\n  num_turns: 1\n   seed: [2\n")),
        ("bad.yaml:3:", "malformed YAML"),
    ),
    Case(
        "repeated section",
        lambda c: load_yaml(write(c, "twice.yaml", "magrpo: {}\nseed: 1\nmagrpo: {}\n")),
        ("twice.yaml:3:", "'magrpo' twice"),
    ),
    Case("missing run file", lambda c: load_yaml(str(c.tmp / "none.yaml")), ("none.yaml",)),
    Case(
        "top-level typo",
        train_run({"magrop": {"num_turns": 2}}),
        ("'magrop'", "did you mean 'magrpo'"),
    ),
    Case(
        "section typo",
        train_run({"datset": {"train_limit": 2}}),
        ("'datset'", "did you mean 'dataset'"),
    ),
    Case(
        "key typo in a section",
        train_run({"output": {"base_dir": "x", "run_nam": "y"}}),
        ("output has no key 'run_nam'", "did you mean 'run_name'"),
    ),
    Case(
        "key typo in the algorithm section",
        train_run({"magrpo": {"num_generatons": 2}}),
        ("magrpo has no key 'num_generatons'", "did you mean 'num_generations'"),
    ),
    Case(
        "unused section of another algorithm",
        train_run({"algorithm": "iac", "maac": {"num_turns": 1}}),
        ("'maac'", "algorithm is 'iac'"),
    ),
    Case(
        "unknown task option",
        train_run({"task": {"name": "coding", "options": {"sandbox_worker": 2}}}),
        ("task.options", "'sandbox_worker'", "did you mean 'sandbox_workers'"),
    ),
    Case(
        "option the demo task does not take",
        train_run({"task": {"name": "length_ratio", "options": {"length": 3}}}),
        ("task.options", "'length'", "valid: chat_template, system_prompt"),
    ),
    Case(
        "task-repo key that moved",
        train_run({"external": {"mode": None, "original_prompt": True}}),
        ("external.original_prompt", "task.options.original_prompt"),
    ),
    Case(
        "section that is not a mapping",
        train_run({"dataset": ["train"]}),
        ("dataset must be a mapping",),
    ),
]


@dataclass
class Context:
    tmp: Path
    tiny_dir: str


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_is_named(case, tmp_path, tiny_dir, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing may land in the repository
    with pytest.raises(case.exc) as err:
        case.action(Context(tmp_path, tiny_dir))
    assert type(err.value) is case.exc
    message = str(err.value)
    for part in case.names:
        assert part in message, f"{part!r} not in: {message}"


def test_a_users_own_error_in_a_transition_propagates_unchanged():
    class Oops(Exception):
        pass

    boom = Oops("the user's own failure")

    def transition(**kw):
        raise boom

    with pytest.raises(Oops) as err:
        build_trees(
            ROWS[:1],
            TreeSettings(num_agents=2, num_turns=2, num_samples=1),
            build_formatters(None, 2),
            fake_generate(1),
            lambda completions, **kw: [0.0] * len(completions[0]),
            transition,
        )
    assert err.value is boom


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_example_passes_the_schema(path):
    check_run_file(load_yaml(str(path)), DEFAULT_RUN)


def test_the_defaults_and_launch_agree_with_the_schema():
    check_run_file(DEFAULT_RUN)
    every = {f.name: f.default for f in dataclasses.fields(CheckpointSection)}
    assert checkpoint_settings({"checkpoint": every}) == every
    assert set(_INIT_KEYS) <= set(field_names(WandbSection))


@pytest.mark.parametrize("task", available_tasks())
def test_each_declared_task_option_is_accepted_and_a_typo_is_not(task):
    declared = sorted(getattr(load_task(task), "option_names", None) or [])
    run = run_with(task={"name": task, "options": {}})
    for option in declared:
        run["task"]["options"] = {option: None}
        check_run_file(run, DEFAULT_RUN)
    run["task"]["options"] = {"no_such_option": 1}
    with pytest.raises(ValueError, match="no_such_option"):
        check_run_file(run, DEFAULT_RUN)
