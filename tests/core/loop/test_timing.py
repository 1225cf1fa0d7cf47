"""The core's training-time accounting (:mod:`comlrl.core.loop.timing`) and its use by TrainerBase.

A fake clock drives :class:`PhaseTimer`, so the sums are exact; the trainer checks only look at
what is counted and when, never at how long anything took.
"""

import math
import os

import pytest

import comlrl.core.loop.timing as timing
from comlrl.core.loop.timing import DEFAULT_PHASES, PhaseTimer
from comlrl.core.rollout import rollouts


@pytest.fixture
def clock(monkeypatch):
    """``perf_counter`` returns the values pushed onto the list, in order."""
    ticks: list[float] = []
    monkeypatch.setattr(timing.time, "perf_counter", lambda: ticks.pop(0))
    return ticks


def test_idle_drain_has_every_phase_at_zero_and_no_throughput():
    out = PhaseTimer().drain()
    assert list(out) == [f"timing/{p}" for p in DEFAULT_PHASES]
    assert all(v == 0.0 for v in out.values())
    assert PhaseTimer().drain(idle_throughput=True)["throughput/tokens_per_s"] == 0.0


def test_phases_accumulate_and_throughput_is_tokens_over_summed_time(clock):
    timer = PhaseTimer(("generate", "reward", "values", "update"))
    clock.extend([10.0, 12.0, 20.0, 21.0, 30.0, 30.5])
    with timer.phase("generate"):
        timer.add_tokens(30)
    with timer.phase("reward"):
        pass
    with timer.phase("generate"):
        timer.add_tokens(12)
    timer.add("update", 0.5)
    out = timer.drain()
    assert out == {
        "timing/generate": 2.5,
        "timing/reward": 1.0,
        "timing/values": 0.0,
        "timing/update": 0.5,
        "throughput/tokens_per_s": 42 / 4.0,
    }


def test_drain_starts_over(clock):
    timer = PhaseTimer()
    clock.extend([0.0, 2.0])
    with timer.phase("update"):
        timer.add_tokens(5)
    assert timer.drain()["timing/update"] == 2.0
    assert timer.tokens == 0 and timer.seconds("update") == 0.0
    assert "throughput/tokens_per_s" not in timer.drain()


def test_nested_blocks_of_one_phase_count_once_and_other_phases_count_apart(clock):
    timer = PhaseTimer()
    # generate opens at 0, reward at 1, the inner generate at 2; reward closes at 4,
    # generate at 7 (the inner generate's end is never read)
    clock.extend([0.0, 1.0, 2.0, 4.0, 7.0])
    with timer.phase("generate"):
        with timer.phase("reward"), timer.phase("generate"):
            pass
    assert timer.seconds("generate") == 7.0
    assert timer.seconds("reward") == 3.0


def test_a_block_that_raises_still_counts(clock):
    timer = PhaseTimer()
    clock.extend([0.0, 1.5])
    with pytest.raises(RuntimeError), timer.phase("reward"):
        raise RuntimeError("reward function failed")
    assert timer.seconds("reward") == 1.5


def test_nothing_is_recorded_while_excluded_and_exclusion_nests(clock):
    timer = PhaseTimer()
    clock.extend([0.0, 5.0])
    assert not timer.evaluating
    with timer.excluded():
        with timer.excluded():
            assert timer.evaluating
        assert timer.evaluating  # the inner exit does not end the outer exclusion
        with timer.phase("generate"):
            timer.add_tokens(100)
        timer.add("update", 3.0)
    assert not timer.evaluating
    out = timer.drain()
    assert all(out[f"timing/{p}"] == 0.0 for p in DEFAULT_PHASES)
    assert timer.tokens == 0


def test_unknown_phases_and_bad_phase_lists_are_refused():
    timer = PhaseTimer()
    with pytest.raises(KeyError, match="values"), timer.phase("values"):
        pass
    with pytest.raises(KeyError, match="values"):
        timer.add("values", 1.0)
    with pytest.raises(ValueError, match="distinct"):
        PhaseTimer(("generate", "generate"))
    with pytest.raises(ValueError, match="at least one"):
        PhaseTimer(())


# ---------------------------------------------------------------- TrainerBase wiring


def _magrpo(tmp_path):
    from tests.core.checkpoint.test_checkpoint_helpers import make_trainer

    return make_trainer(tmp_path / "magrpo", epochs=1)


def _iac(tmp_path):
    from tests.ac.helpers import PROMPTS, make_iac

    trainer = make_iac(tmp_path / "iac", eval_interval=1, eval_num_samples=1)
    trainer.eval_dataset = PROMPTS[2:]
    return trainer


@pytest.mark.parametrize("build", [_magrpo, _iac], ids=["magrpo", "iac"])
def test_trainer_generation_and_scoring_count_and_evaluation_does_not(tmp_path, build):
    trainer = build(tmp_path)
    params = rollouts.sampling_params(trainer)
    prompts = [["Write a story about a cat."] for _ in range(trainer.num_agents)]
    samples = rollouts.generate_per_agent(trainer, prompts, 2, params)
    assert trainer.timing.tokens == sum(s.num_tokens for agent in samples for s in agent)
    assert trainer.timing.seconds("generate") > 0.0
    texts = [agent[0].texts for agent in samples]
    rollouts.score(trainer, texts, prompts=["p", "p"], batch_items=[{}, {}])
    assert trainer.timing.seconds("reward") > 0.0
    before = {p: trainer.timing.seconds(p) for p in trainer.timing_phases}
    tokens = trainer.timing.tokens

    metrics = trainer.evaluate()

    assert metrics and not trainer.timing.evaluating
    assert {p: trainer.timing.seconds(p) for p in trainer.timing_phases} == before
    assert trainer.timing.tokens == tokens


@pytest.mark.parametrize("build", [_magrpo, _iac], ids=["magrpo", "iac"])
def test_training_records_carry_the_trainer_phases(tmp_path, build):
    from comlrl.core.logging.jsonl import read_metrics

    trainer = build(tmp_path)
    trainer.verbose = False
    trainer.train()
    records = read_metrics(os.path.join(trainer.reporting.run_dir, "metrics.jsonl"))
    timed = [r for r in records if "timing/generate" in r]
    assert timed
    for r in timed:
        for phase in trainer.timing_phases:
            value = r[f"timing/{phase}"]
            assert math.isfinite(value) and value >= 0.0
        assert r["throughput/tokens_per_s"] > 0.0
    evals = [r for r in records if any(k.startswith("eval/") for k in r)]
    assert evals and not any(k.startswith(("timing/", "throughput/")) for r in evals for k in r)
