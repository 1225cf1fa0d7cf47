"""Watching an actor-critic run: completions with the critic's advantages, and a final
evaluation after the last update."""

import json

import pytest

from comlrl.core.logging.completions import COMPLETIONS_FILE
from comlrl.core.logging.jsonl import read_metrics

from .helpers import PROMPTS, length_reward, make_iac, make_maac


@pytest.mark.parametrize("make", [make_iac, make_maac])
def test_completions_and_final_eval(tmp_path, make):
    trainer = make(tmp_path, log_completions=2, eval_interval=100, eval_num_samples=1)
    trainer.eval_dataset = PROMPTS[2:3]
    trainer.train()
    run = tmp_path / "run"
    rows = [json.loads(line) for line in (run / COMPLETIONS_FILE).read_text().splitlines()]
    records = read_metrics(run / "metrics.jsonl")
    assert rows and all("agent_0/actor_loss" in records[r["record"]] for r in rows)
    for row in rows:
        a, b = row["completions"]
        assert row["reward"] == pytest.approx(length_reward([a], [b])[0])
        assert row["prompts"][0] in [p["prompt"] for p in PROMPTS[:2]]
        assert all(isinstance(v, float) for v in row["advantages"])
    last_train = max(i for i, r in enumerate(records) if "agent_0/actor_loss" in r)
    assert last_train == len(records) - 2
    assert "eval/turn_1/reward_mean" in records[-1]
