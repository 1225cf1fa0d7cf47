"""The scaling benchmark: its points, the N-agent task, the rendering, and one tiny real point."""

from __future__ import annotations

import json
import math

import pytest

from benchmarks.portable import tasks
from benchmarks.scaling import __main__ as cli
from benchmarks.scaling import points as pts
from benchmarks.scaling import report

# --- point definitions -------------------------------------------------------------------------


def test_each_sweep_varies_only_its_factor():
    for sweep in pts.SWEEPS:
        settings = sweep.settings()
        assert len(settings) == len(sweep.values) >= 2
        assert [s[sweep.factor] for s in settings] == list(sweep.values)
        for s in settings:
            changed = {k for k in s if s[k] != sweep.anchor[k]}
            assert changed <= {sweep.factor}, (sweep.name, changed)
        # the anchor itself differs from the base point only where the sweep says why (cross)
        off_base = {k for k in pts.BASE if sweep.anchor[k] != pts.BASE[k]}
        assert off_base <= {"joint_mode", "num_generations"}


def test_sweeps_cover_the_issue_grid():
    grid = {(sw.factor, sw.anchor["joint_mode"]): sw.values for sw in pts.SWEEPS}
    assert grid[("num_agents", "aligned")] == (2, 4)
    assert grid[("num_generations", "aligned")] == (4, 8, 16)
    assert grid[("num_turns", "aligned")] == (1, 2, 3)
    assert grid[("num_turns", "cross")] == (1, 2, 3)
    assert grid[("max_new_tokens", "aligned")] == (64, 256)
    assert pts.BASE == dict(
        num_agents=2, num_generations=4, num_turns=1, max_new_tokens=64, joint_mode="aligned"
    )


def test_points_are_distinct_and_the_base_is_shared():
    points = pts.all_points()
    keys = [p.key for p in points]
    assert len(keys) == len(set(keys)) == 10
    base = next(p for p in points if p.key == pts.point_key(pts.BASE))
    assert len(base.sweeps) == 4
    assert set(pts.RUNS) <= set(keys)  # no run size for a point that does not exist


def test_tree_sizes():
    aligned = dict(pts.BASE, num_turns=3)
    assert pts.nodes_per_item(aligned) == 1 + 4 + 16
    assert pts.env_steps_per_item(aligned) == 4 + 16 + 64
    cross = dict(pts.BASE, joint_mode="cross", num_generations=2, num_turns=2)
    assert pts.joint_actions_per_node(cross) == 4
    assert pts.env_steps_per_item(cross) == 4 + 16
    assert pts.joint_actions_per_node(dict(cross, num_agents=1)) == 2


def test_spec_holds_every_field_both_drivers_read():
    point = next(p for p in pts.all_points() if p.key == "n2-k2-t2-cross-64")
    spec = point.spec(model_dir="/m", device="cpu", threads=1, seed=3)
    assert spec["joint_mode"] == "cross"
    assert spec["min_new_tokens"] == spec["max_new_tokens"] == 64
    assert spec["rollout_buffer_size"] == pts.nodes_per_item(point.settings) * point.items
    assert spec["workload"] == "magrpo" and spec["num_items"] == point.items
    assert point.env_steps == 20 * point.items * point.epochs


def test_select_rejects_unknown_points():
    points = pts.all_points()
    assert [p.key for p in pts.select(points, ["n4-k4-t1-aligned-64"])] == ["n4-k4-t1-aligned-64"]
    with pytest.raises(ValueError, match="--points"):
        pts.select(points, ["n9-k1"])


# --- the N-agent task ------------------------------------------------------------------------


def _two_agent_reward_before(c1, c2):
    """The two-agent reward as it was before the N-agent extension (kept here as the pin)."""

    def score(a, b):
        if not a:
            return 0.0
        r = len(b) / len(a)
        return 1.0 if 2.0 <= r <= 3.0 else math.exp(-(2.0 - r if r < 2.0 else r - 3.0))

    return [score(a, b) for a, b in zip(c1, c2)]


def _two_agent_transition_before(prompt, first, second):
    ratio = len(second) / max(1, len(first))
    hint = "longer" if ratio < 2.0 else ("shorter" if ratio > 3.0 else "the same")
    return [
        f"{prompt} Your previous answer was {len(first)} characters. Write it again.",
        f"{prompt} The other answer was {len(first)} characters and yours {len(second)}. "
        f"Write it again, {hint}.",
    ]


TEXTS = ["", "a", "abc", "abcdefg", "x" * 10, "y" * 25, "z" * 40]


def test_two_agent_reward_and_transition_unchanged():
    firsts = [a for a in TEXTS for _ in TEXTS]
    seconds = [b for _ in TEXTS for b in TEXTS]
    assert tasks.length_ratio_reward(firsts, seconds) == _two_agent_reward_before(firsts, seconds)
    for a in TEXTS:
        for b in TEXTS:
            got = tasks.feedback_transition(prompt="P.", agent_completions=[a, b], num_agents=2)
            assert got == _two_agent_transition_before("P.", a, b)


def test_four_agents_get_four_prompts_and_a_chain_reward():
    answers = ["abc", "abcdefg", "x" * 3, "y" * 8]
    prompts = tasks.feedback_transition(prompt="P.", agent_completions=answers, num_agents=4)
    assert len(prompts) == 4
    assert prompts[0] == "P. Your previous answer was 3 characters. Write it again."
    assert prompts[2] == "P. The other answer was 7 characters and yours 3. Write it again, longer."
    assert prompts[3].endswith("was 3 characters and yours 8. Write it again, the same.")
    [reward] = tasks.length_ratio_reward(*[[a] for a in answers])
    expected = (1.0 + math.exp(-(2.0 - 3 / 7)) + 1.0) / 3
    assert reward == pytest.approx(expected)


def test_n_agent_task_rejects_bad_input():
    with pytest.raises(ValueError, match="at least 2 agents"):
        tasks.length_ratio_reward(["a"])
    with pytest.raises(ValueError, match="num_agents=3"):
        tasks.feedback_transition(prompt="P", agent_completions=["a", "b"], num_agents=3)


# --- rendering from a saved results file -----------------------------------------------------


def _side(rate, tokens, rss):
    return dict(
        env_steps_per_s=rate,
        tokens_per_s=tokens,
        peak_rss_mib=rss,
        runs=[dict(env_steps=64)],
    )


def _synthetic_results() -> dict:
    records = []
    for i, point in enumerate(pts.all_points()[:3]):
        ref, ours = _side(5.0 + i, 600.0, 900.0), _side(20.0 + i, 2400.0, 850.0)
        records.append(
            dict(
                key=point.key,
                settings=point.settings,
                sweeps=list(point.sweeps),
                items=point.items,
                epochs=point.epochs,
                expected_env_steps=point.env_steps,
                sides={"reference": ref, "ours": ours},
                ratios=dict(speedup_env_steps=(20.0 + i) / (5.0 + i), speedup_tokens=4.0),
            )
        )
    return dict(clock="cpu", points=records)


def test_table_renders_every_point():
    text = report.table(_synthetic_results())
    lines = text.strip().splitlines()
    assert len(lines) == 2 + 3
    assert (
        "| `n2-k4-t1-aligned-64` | base | 8 x 2 | 64 | 5.0 | 20.0 | 600.0 | 2400.0 | 4.00x" in text
    )
    assert "| N=4 |" in lines[3] and "850 / 900" in lines[3]


def test_series_and_plot(tmp_path):
    results = _synthetic_results()
    data = {d["sweep"]: d for d in report.series(results)}
    assert data["samples"]["x"] == [4, 8]  # K=16 is not in the synthetic file
    assert data["samples"]["cost"]["ours"] == pytest.approx([1000 / 20.0, 1000 / 22.0])
    assert data["agents"]["speedup"] == pytest.approx([4.0, 21.0 / 6.0])
    path = report.plot(results, tmp_path / "img" / "s.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="no point"):
        report.plot(dict(points=[]), tmp_path / "empty.png")


def test_table_and_plot_subcommands(tmp_path, capsys):
    out = tmp_path / "scaling.json"
    out.write_text(json.dumps(_synthetic_results()))
    assert cli.main(["table", "--out", str(out)]) == 0
    assert "`n2-k8-t1-aligned-64`" in capsys.readouterr().out
    png = tmp_path / "p.png"
    assert cli.main(["plot", "--out", str(out), "--png", str(png)]) == 0
    assert png.exists()
    with pytest.raises(SystemExit, match="no results file"):
        cli.main(["table", "--out", str(tmp_path / "missing.json")])


# --- one tiny real point, ours only, in process ----------------------------------------------


@pytest.mark.parametrize(
    "settings, env_steps",
    [
        # cross: 4 joint actions at the root, 4 children with 4 each
        (dict(pts.BASE, joint_mode="cross", num_generations=2, num_turns=2), 4 + 16),
        # four agents, two turns: the transition must hand each of the 4 agents a prompt
        (dict(pts.BASE, num_agents=4, num_generations=2, num_turns=2), 2 + 4),
    ],
)
def test_tiny_point_runs_on_our_side(tiny_dir, tmp_path, settings, env_steps):
    from benchmarks.ours import magrpo_builder
    from benchmarks.portable.protocol import timed_training

    point = pts.Point("tiny", dict(settings, max_new_tokens=4), (), 1, 1, 1)
    spec = point.spec(model_dir=tiny_dir, device="cpu", threads=None, seed=0)
    spec["warmup_epochs"] = 0
    assert point.env_steps == env_steps
    result = timed_training(magrpo_builder(spec, str(tmp_path)), lambda trainer, meter: None, spec)
    assert result["env_steps"] == env_steps
