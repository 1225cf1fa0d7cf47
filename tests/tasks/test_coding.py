"""Coding task: leveled execution reward, HumanEval offline, feedback transitions, attacks."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from comlrl.core.task import TaskSpec
from comlrl.tasks.coding.data import normalize_coding_row
from comlrl.tasks.coding.task import TASK as CODING
from comlrl.tasks.sandbox import max_concurrency
from tests.tasks.helpers import FAST_LIMITS

OPTIONS = {"sandbox": dict(FAST_LIMITS), "sandbox_workers": 4}
AUX = "def aux(text):\n    return [c for c in text.lower() if c in 'aeiou']"
MAIN = "def count_vowels(text):\n    vowels = aux(text)\n    return len(vowels)"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def coding():
    bundle = CODING.build(TaskSpec(external_mode="level_feedback", options=OPTIONS))
    item = next(r for r in bundle.train_dataset if r["entry_point"] == "count_vowels")
    return bundle, item


def rate(coding, aux, main):
    bundle, item = coding
    return bundle.reward_func.breakdown([[aux], [main]], batch_items=[item])[0]


def test_perfect_pair_scores_the_declared_maximum(coding):
    row = rate(coding, AUX, MAIN)
    assert row["total"] == coding[0].reward_func.reward_range[1] == 4.5
    fenced = rate(coding, f"```python\n{AUX}\n```", f"Here you go:\n```python\n{MAIN}\n```")
    assert fenced["total"] == 4.5


CASES = [
    ("format gate: aux is prose", "I will help with vowels.", MAIN, 0.0),
    ("main missing: stop after L1", AUX, "def solve(text):\n    return 0", 0.4),
    ("syntax error: stop after L1", AUX, "def count_vowels(text):\n    return len(aux(text)", 1.0),
    ("no test passes", AUX, "def count_vowels(text):\n    v = aux(text)\n    return -1", 1.5),
    (
        "partial pass with aux used",
        AUX,
        "def count_vowels(text):\n    v = aux(text)\n    return 2",
        1.0 + 0.5 + 0.25 + 2.0,
    ),
    (
        "tests pass without aux: capped",
        AUX,
        "def count_vowels(text):\n    return sum(c in 'aeiouAEIOU' for c in text)",
        2.0,
    ),
    (
        "thin wrapper",
        "def aux(text):\n    return sum(c in 'aeiouAEIOU' for c in text)",
        "def count_vowels(text):\n    return aux(text)",
        3.5,
    ),
    (
        "aux result ignored",
        AUX,
        "def count_vowels(text):\n    aux(text)\n    return sum(c in 'aeiouAEIOU' for c in text)",
        4.0,
    ),
    (
        "timeout penalty",
        AUX,
        "def count_vowels(text):\n    v = aux(text)\n    while True:\n        pass\n    return 0",
        1.3,
    ),
]


@pytest.mark.parametrize("label, aux, main, expected", CASES, ids=[c[0] for c in CASES])
def test_each_failure_mode_lands_at_its_level(coding, label, aux, main, expected):
    assert rate(coding, aux, main)["total"] == pytest.approx(expected)


def _attack(body: str) -> str:
    indented = "\n".join("    " + line for line in body.splitlines())
    return f"def count_vowels(text):\n    v = aux(text)\n{indented}\n    return len(v)"


ATTACKS = [
    ("infinite loop", "while True:\n    pass", 1.3),
    ("memory exhaustion", "x = bytearray(8 * 1024 ** 3)", 1.5),
    ("fork bomb", "import os\nwhile True:\n    os.fork()", 1.5),
    (
        "huge file",
        "f = open('big.bin', 'wb')\nfor _ in range(64):\n    f.write(b'0' * 1024 ** 2)",
        1.5,
    ),
    ("network", "import socket\nsocket.create_connection(('127.0.0.1', 9), timeout=1)", 1.5),
]


@pytest.mark.parametrize("label, body, expected", ATTACKS, ids=[a[0] for a in ATTACKS])
def test_attacks_get_the_documented_failure_value(coding, label, body, expected):
    row = rate(coding, AUX, _attack(body))
    assert row["tests_passed"] == 0 and row["syntax_ok"] == 1.0
    assert row["total"] == pytest.approx(expected)


def test_write_outside_the_work_dir_fails_and_leaves_no_file(coding):
    target = REPO / f"coding-escape-{uuid.uuid4().hex}"
    row = rate(coding, AUX, _attack(f"open({str(target)!r}, 'w').write('x')"))
    assert row["total"] == pytest.approx(1.5)
    assert not target.exists()


def test_batch_of_32_is_scored_on_several_processes(coding):
    bundle, item = coding
    mains = [
        MAIN if j % 2 == 0 else "def count_vowels(text):\n    v = aux(text)\n    return 2"
        for j in range(32)
    ]
    rewards = bundle.reward_func([AUX] * 32, mains, batch_items=[item] * 32)
    assert rewards == [4.5 if j % 2 == 0 else 3.75 for j in range(32)]
    batch = bundle.reward_func.scorer.pool.last_batch
    assert len(batch) == 32
    assert len({r.pid for r in batch}) > 1
    assert max_concurrency(batch) > 1


def test_level_feedback_names_failing_test_and_missing_definitions(coding):
    bundle, item = coding
    wrong_main = "def count_vowels(text):\n    return len(text)"
    prompts = bundle.external_transition(
        prompt=item["prompt"],
        agent_completions=["def helper(x):\n    return x", wrong_main],
        num_agents=2,
        prompt_history_per_agent=[[], []],
        response_history_per_agent=[[], []],
    )
    assert len(prompts) == 2
    for text in prompts:
        assert "`def aux(...)`: MISSING" in text
        assert "FAILED `assert candidate('Hello') == 2`" in text
        assert "expected 2, got 5" in text
    assert "never calls `aux(...)`" in prompts[1]
    assert "Revise your `aux(...)` function" in prompts[0]
    assert "Revise your `count_vowels(...)` function" in prompts[1]
    missing_main = bundle.external_transition(
        prompt=item["prompt"], agent_completions=[AUX, "print(1)"], num_agents=2
    )
    assert "`def count_vowels(...)`: MISSING" in missing_main[1]


def test_plain_transition_and_batch_item_keyword(coding):
    bundle, item = coding
    plain = CODING.build(TaskSpec(external_mode="plain", options=OPTIONS))
    prompts = plain.external_transition(
        prompt="not a known prompt", agent_completions=[AUX, MAIN], num_agents=2, batch_item=item
    )
    assert "Your previous code:\n" + AUX in prompts[0]
    assert "Static checks" not in prompts[0]


def test_humaneval_offline_has_164_real_problems():
    bundle = CODING.build(
        TaskSpec(
            dataset_name="humaneval",
            train_split="test[16:]",
            eval_split="test[:16]",
            options=OPTIONS,
        )
    )
    assert len(bundle.train_dataset) == 148 and len(bundle.eval_dataset) == 16
    first = bundle.eval_dataset[0]
    assert first["task_id"] == "HumanEval/0" and first["entry_point"] == "has_close_elements"
    items = bundle.eval_dataset[:8]
    mains = [it["prompt"] + it["canonical_solution"] for it in items]
    rows = bundle.reward_func.breakdown(
        [["def aux(x):\n    return x"] * 8, mains], batch_items=items
    )
    assert [r["pass_rate"] for r in rows] == [1.0] * 8
    with pytest.raises(ValueError, match="only the split 'test'"):
        CODING.build(TaskSpec(dataset_name="humaneval", train_split="train"))


def test_mbpp_rows_are_converted():
    row = normalize_coding_row(
        {
            "task_id": 2,
            "text": "Return the sum of a and b.",
            "code": "def add(a, b):\n    return a + b",
            "test_list": ["assert add(1, 2) == 3", "assert add(0, 0) == 0"],
        }
    )
    assert row["entry_point"] == "add" and "def add(a, b):" in row["prompt"]
    assert "candidate(1, 2)" in row["test"]
    with pytest.raises(ValueError, match="'entry_point'"):
        normalize_coding_row({"prompt": "def f(): pass", "test": "def check(c): assert 1"})


@settings(max_examples=40, deadline=None)
@given(st.text(max_size=300), st.text(max_size=300))
def test_reward_stays_in_range_on_junk(aux, main):
    low, high = _JUNK.reward_func.reward_range
    value = _JUNK.reward_func([aux], [main], batch_items=[_JUNK.train_dataset[0]])[0]
    assert low <= value <= high


_JUNK = CODING.build(TaskSpec(options=OPTIONS))
