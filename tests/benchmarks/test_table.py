"""``python -m benchmarks table`` reprints the workload results of a directory and nothing else
that lives there (revision checks, scaling runs, rechecks under other names)."""

from __future__ import annotations

import json

from benchmarks.__main__ import main


def _result(workload: str, size: str, rate: float) -> dict:
    side = {"env_steps_per_s": rate, "peak_rss_mib": 900.0}
    return {
        "workload": workload,
        "size": size,
        "device": "cpu",
        "clock": "cpu",
        "sides": {"ours": side, "reference": {**side, "env_steps_per_s": rate / 4}},
        "ratios": {"speedup_env_steps": 4.0},
    }


def test_the_table_reads_only_workload_result_files(tmp_path, capsys):
    (tmp_path / "magrpo-small-cpu.json").write_text(json.dumps(_result("magrpo", "small", 8.0)))
    (tmp_path / "iac-tiny-cpu.json").write_text(json.dumps(_result("iac", "tiny", 12.0)))
    (tmp_path / "magrpo-tiny-cpu.json").write_text(json.dumps(_result("magrpo", "tiny", 20.0)))
    (tmp_path / "revisions-abc1234-tiny.json").write_text(json.dumps([{"workload": "magrpo"}]))
    recheck = _result("iac", "tiny", 99.0)
    (tmp_path / "recheck-iac-tiny-ours.json").write_text(json.dumps(recheck))
    (tmp_path / "scaling.json").write_text(json.dumps({"points": []}))
    assert main(["table", "--out", str(tmp_path)]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")][1:]
    assert [row.split(" | ")[:2] for row in rows] == [
        ["| magrpo", "tiny"],
        ["| magrpo", "small"],
        ["| iac", "tiny"],
    ]
    assert "99.0" not in "\n".join(rows)  # the recheck under another name stays out
