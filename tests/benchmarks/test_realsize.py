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
