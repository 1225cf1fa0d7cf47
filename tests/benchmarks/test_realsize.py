"""The realsize benchmark's table: unmeasured cells say so, measured ones show their numbers."""

from benchmarks.realsize.scoring import CELLS, table


def test_unmeasured_cells_are_marked_not_measured():
    text = table({})
    assert text.count("not measured") == 3 * len(CELLS)


def test_measured_cells_show_their_peak():
    rec = {"parameters": 9.8e6, "vocab": 151936, "floor_gb": 0.88,
           "peak_above_floor_gb": 0.2, "update_seconds": 32.7}  # fmt: skip
    text = table({"scoring-after": rec})
    row = next(line for line in text.splitlines() if line.startswith("| scoring-after "))
    assert "0.20" in row and "not measured" not in row
    assert text.count("not measured") == 3 * (len(CELLS) - 1)


def _matrix_results():
    from benchmarks.realsize.matrix import Cell

    fits = Cell("qwen05", "magrpo", 2, "adapters")
    too_big = Cell("qwen05", "magrpo", 4, "fp32")
    return {
        fits.name: {
            "status": "measured",
            "peak_rss_gb": 3.35,
            "train_seconds": 29.1,
            "decode_seconds": 24.8,
            "scoring_seconds": 2.2,
            "backward_step_seconds": 2.0,
            "load_seconds": 10.9,
        },  # fmt: skip
        too_big.name: {
            "status": "does not fit",
            "floor_gb": too_big.floor_gb(),
            "reason": "weights, gradients and AdamW state alone need 29.4 GB",
        },  # fmt: skip
    }


def test_matrix_cells_that_cannot_fit_are_recorded_without_running():
    from benchmarks.realsize.matrix import MACHINE_GB, Cell, cells

    assert Cell("qwen05", "magrpo", 4, "fp32").floor_gb() > MACHINE_GB
    assert Cell("qwen05", "magrpo", 8, "adapters").floor_gb() < 3
    names = [c.name for c in cells()]
    assert len(names) == len(set(names))
    assert "trl-qwen05-grpo-n1-fp32" in names and "ref-qwen05-madpo-n2-fp32" in names


def test_the_docs_blocks_are_rewritten_from_the_results(tmp_path):
    from benchmarks.realsize import report

    doc, tutorial = tmp_path / "performance.md", tmp_path / "real_models.md"
    doc.write_text(f"intro\n{report.START}\nstale\n{report.END}\noutro\n")
    tutorial.write_text(f"a\n{report.OPTIONS_START}\n{report.OPTIONS_END}\nb\n")
    report.write_doc(_matrix_results(), "python -m benchmarks realsize", doc, tutorial)
    text = doc.read_text()
    assert "stale" not in text and text.startswith("intro\n") and text.endswith("outro\n")
    assert "| qwen05-magrpo-n2-adapters | 3.35 | 29.1 |" in text
    assert "| qwen05-iac-n2-fp32 | not measured |" in text
    options = tutorial.read_text()
    assert "| Qwen2.5-0.5B | 2 |" in options and "3.4 GB, 29 s" in options
    assert "does not fit (floor 29.4 GB)" in options and "| pending |" in options
