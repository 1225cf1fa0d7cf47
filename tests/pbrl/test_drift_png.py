"""The drift logger's PNG plot: written next to the JSON and SVG, and skipped with a warning
naming the extra when matplotlib is missing."""

import importlib.util

import pytest
from matplotlib.image import imread

from comlrl.pbrl import drift

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _record():
    hist = drift.RewardHistogram(0.0, 1.0)
    return drift.iteration_record(
        hist,
        3,
        {"target": [0.1, 0.2, 0.9], "comparator": [0.5, 0.55]},
        {"target": [0.9], "comparator": [0.5]},
        1,
    )


def test_iteration_writes_json_svg_and_png(tmp_path):
    written = drift.write_iteration(str(tmp_path), _record())
    assert [p.rsplit(".", 1)[1] for p in written] == ["json", "svg", "png"]
    png = tmp_path / "iteration_0003.png"
    assert png.read_bytes()[:8] == PNG_SIGNATURE
    image = imread(png)
    assert image.shape[0] > 100 and image.shape[1] > 300
    assert not list(tmp_path.glob("*.tmp"))


def test_png_bars_show_the_counts():
    record = _record()
    fig = drift.drift_figure(record)
    for ax, section in zip(fig.axes, ("candidate", "selected")):
        heights = [bar.get_height() for bar in ax.patches]
        expected = record[section]["target"]["counts"] + record[section]["comparator"]["counts"]
        assert heights == expected
        assert [t.get_text() for t in ax.get_legend().get_texts()] == ["target", "comparator"]


def test_without_matplotlib_png_is_skipped_with_a_warning(tmp_path, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "matplotlib" else real(name, *a),
    )
    monkeypatch.setattr(drift, "_warned_no_png", False)
    with pytest.warns(UserWarning, match=r"comlrl-core\[plot\]"):
        written = drift.write_iteration(str(tmp_path), _record())
    assert len(written) == 2 and not (tmp_path / "iteration_0003.png").exists()
