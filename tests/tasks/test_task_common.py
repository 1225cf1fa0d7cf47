"""Shared task machinery: registration, data loading, prompts, lookups, eval hooks."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import entry_points

import pytest

from comlrl.core.task import Task, TaskSpec
from comlrl.tasks.common.data import load_rows, parse_split
from comlrl.tasks.common.prompting import AgentFormatter
from comlrl.tasks.writing.tldr import TASK as TLDR

TASK_NAMES = ["writing_tldr", "writing_arxiv", "coding", "code_completion", "tool_use", "travel"]


@pytest.mark.parametrize("name", TASK_NAMES)
def test_every_task_is_registered_and_builds_offline(name):
    eps = {ep.name: ep for ep in entry_points(group="comlrl.tasks")}
    assert "length_ratio" in eps
    task = eps[name].load()
    assert isinstance(task, Task) and task.name == name
    bundle = task.build(TaskSpec(num_agents=task.num_agents, train_limit=2, eval_limit=1))
    assert len(bundle.train_dataset) == 2 and len(bundle.eval_dataset) == 1
    assert len(bundle.formatters) == task.num_agents
    low, high = bundle.reward_func.reward_range
    assert low < high
    prompts = [f(bundle.train_dataset[0]) for f in bundle.formatters]
    assert all(isinstance(p, str) and p for p in prompts)
    assert prompts[0] != prompts[1]


def test_tasks_import_no_algorithm_family():
    code = (
        "import sys\n"
        + "".join(
            f"import comlrl.tasks.{m}\n"
            for m in (
                "writing.tldr",
                "writing.arxiv",
                "coding.task",
                "completion.task",
                "tool_use.task",
                "travel.task",
            )
        )
        + "print([m for m in sys.modules if m.startswith(('comlrl.reinforce', 'comlrl.ac', "
        "'comlrl.pbrl', 'comlrl.trainers'))])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_parse_split_slices_and_rejects_garbage():
    assert parse_split("train") == ("train", None)
    assert parse_split("test[16:]") == ("test", slice(16, None))
    assert parse_split("test[66:82]") == ("test", slice(66, 82))
    with pytest.raises(ValueError, match="dataset split"):
        parse_split("train[a:b]")


def _rows(n):
    return [{"prompt": f"post number {i} " * 3, "split": "train"} for i in range(n)]


def test_local_jsonl_json_parquet_and_directory(tmp_path):
    rows = _rows(5)
    jsonl = tmp_path / "data.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert load_rows(str(jsonl), "train[1:3]", builtin=lambda s: []) == rows[1:3]
    by_split = tmp_path / "data.json"
    by_split.write_text(json.dumps({"train": rows[:2], "test": rows[2:]}))
    assert load_rows(str(by_split), "test", builtin=lambda s: []) == rows[2:]
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path / "folder"
    folder.mkdir()
    pq.write_table(pa.Table.from_pylist(rows), folder / "train.parquet")
    assert load_rows(str(folder), "train", builtin=lambda s: []) == rows
    with pytest.raises(ValueError, match="no file for split"):
        load_rows(str(folder), "test", builtin=lambda s: [])
    with pytest.raises(ValueError, match="does not exist"):
        load_rows(str(tmp_path / "missing.jsonl"), "train", builtin=lambda s: [])


def test_task_reads_a_local_file_and_rejects_bad_rows(tmp_path):
    path = tmp_path / "posts.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in _rows(4)))
    bundle = TLDR.build(
        TaskSpec(dataset_name=str(path), train_split="train[:3]", eval_split="train[3:]")
    )
    assert len(bundle.train_dataset) == 3 and len(bundle.eval_dataset) == 1
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"title": "no text"}))
    with pytest.raises(ValueError, match="'prompt'"):
        TLDR.build(TaskSpec(dataset_name=str(bad), train_split="train", eval_split="train"))


def test_bad_options_and_modes_are_named():
    with pytest.raises(ValueError, match="unknown keys"):
        TLDR.build(TaskSpec(options={"colour": 1}))
    with pytest.raises(ValueError, match="external.mode"):
        TLDR.build(TaskSpec(external_mode="level_feedback"))
    with pytest.raises(ValueError, match="num_agents"):
        TLDR.build(TaskSpec(num_agents=3))
    with pytest.raises(ValueError, match="train_limit"):
        TLDR.build(TaskSpec(train_limit=0))
    with pytest.raises(ValueError, match="built-in sample has no split"):
        TLDR.build(TaskSpec(train_split="validation"))


class _ChatTokenizer:
    chat_template = "{{ messages }}"

    def apply_chat_template(self, messages, tokenize, add_generation_prompt):
        assert tokenize is False and add_generation_prompt is True
        body = "".join(f"<{m['role']}>{m['content']}</{m['role']}>" for m in messages)
        return body + "<assistant>"


def test_chat_template_wraps_prompts_and_external_prompts():
    fmt = AgentFormatter(
        lambda item: f"Summarize: {item['prompt']}",
        tokenizer=_ChatTokenizer(),
        system_prompt="Be brief.",
    )
    assert fmt({"prompt": "x"}) == "<system>Be brief.</system><user>Summarize: x</user><assistant>"
    assert fmt({"prompt": "x"}, external_prompts="Again") == (
        "<system>Be brief.</system><user>Again</user><assistant>"
    )
    plain = AgentFormatter(lambda item: "hi", tokenizer=_ChatTokenizer(), chat_template="off")
    assert plain({}) == "hi"
    with pytest.raises(ValueError, match="chat_template"):
        AgentFormatter(lambda item: "hi", tokenizer=None, chat_template="on")
    with pytest.raises(ValueError, match="chat_template"):
        AgentFormatter(lambda item: "hi", chat_template="sometimes")


def test_reward_finds_rows_by_prompt_and_checks_shapes():
    bundle = TLDR.build(TaskSpec())
    item = bundle.train_dataset[0]
    by_item = bundle.reward_func(["a b c d e f g h"], ["x"], batch_items=[item])
    by_prompt = bundle.reward_func(["a b c d e f g h"], ["x"], prompts=[bundle.formatters[0](item)])
    assert by_item == by_prompt
    with pytest.raises(ValueError, match="same number of completions"):
        bundle.reward_func(["a"], ["b", "c"], batch_items=[item])
    with pytest.raises(ValueError, match="batch_items"):
        bundle.reward_func(["a"], ["b"])
    with pytest.raises(ValueError, match="no dataset row"):
        bundle.reward_func(["a"], ["b"], prompts=["an unknown prompt"])


def test_eval_hooks_report_levels_per_turn():
    bundle = TLDR.build(TaskSpec())
    items = bundle.eval_dataset[:2]
    short = "The author wants advice about a problem with a friend today."
    turns = [[[short, short], [short]], [["no", short * 2], [short * 3]]]
    detailed = bundle.eval_logger(agent_completions_turns=turns, batch_items=items)
    assert len(detailed) == 2
    assert set(detailed[0]) >= {"turn_1/total", "turn_2/total", "turn_1/level1_length"}
    assert "turn_2/total" not in detailed[1]
    agg = bundle.eval_aggregator(detailed, num_turns=2)
    assert agg["turn_1/total"] == pytest.approx(
        (detailed[0]["turn_1/total"] + detailed[1]["turn_1/total"]) / 2
    )
