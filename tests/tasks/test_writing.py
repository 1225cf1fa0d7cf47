"""Writing rewards, level by level, on hand-written completions."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from comlrl.core.task import TaskSpec
from comlrl.tasks.writing.arxiv import TASK as ARXIV
from comlrl.tasks.writing.metrics import transition_categories, transition_score
from comlrl.tasks.writing.tldr import TASK as TLDR

CONCISE = (
    "My roommate keeps eating my groceries and insists everything in our shared fridge "
    "belongs to both of us."
)
DETAILED = (
    "First, the author moved into a flat three months ago. In addition, her roommate "
    "regularly eats yogurt, leftovers and coffee. However, she claims groceries are "
    "communal because they share a kitchen. Indeed, costs doubled; for example, weekly "
    "spending rose. Overall, she wants calm advice."
)
NO_CONNECTIVES = (
    "The tenant reports her flatmate repeatedly consumes yogurt, leftovers and coffee "
    "purchased separately; she considers groceries communal property. Weekly "
    "expenses doubled, so the writer seeks diplomatic phrasing."
)


@pytest.fixture(scope="module")
def tldr():
    return TLDR.build(TaskSpec())


def score(bundle, first, second):
    item = bundle.train_dataset[0]
    return bundle.reward_func.breakdown([[first], [second]], batch_items=[item])[0]


def test_tldr_perfect_pair_scores_the_declared_maximum(tldr):
    row = score(tldr, CONCISE, DETAILED)
    assert row["total"] == tldr.reward_func.reward_range[1] == 3.0
    assert row["levels_passed"] == 4


def test_tldr_length_window_gate(tldr):
    assert score(tldr, "Too short.", DETAILED)["total"] == 0.0
    too_long = " ".join(["word"] * 300)
    assert score(tldr, CONCISE, too_long)["total"] == 0.0


def test_tldr_ratio_outside_band_stops_at_level_one(tldr):
    row = score(tldr, CONCISE, " ".join([CONCISE] * 6))
    assert row["length_ratio"] > 5.0
    assert row["total"] == 0.5 and row["levels_passed"] == 1


def test_tldr_ratio_ramp_gives_partial_credit(tldr):
    second = CONCISE + " " + CONCISE[:40]
    row = score(tldr, CONCISE, second)
    ratio = len(second) / len(CONCISE)
    assert 1.1 < ratio < 1.6
    assert row["level2_ratio"] == pytest.approx((ratio - 1.1) / 0.5)
    assert row["levels_passed"] == 2  # the repeated words fail the unique-word level
    assert row["total"] == pytest.approx(0.5 + (ratio - 1.1) / 0.5)


def test_tldr_repeated_words_fail_the_unique_word_level(tldr):
    row = score(tldr, CONCISE, CONCISE + " " + CONCISE)
    assert row["level2_ratio"] == 1.0 and row["unique_ratio"] == pytest.approx(1.0)
    assert row["total"] == 1.5


def test_tldr_style_level_without_connectives(tldr):
    assert transition_categories(NO_CONNECTIVES) == []
    row = score(tldr, CONCISE, NO_CONNECTIVES)
    assert row["levels_passed"] == 4 and row["transition"] == 0.0
    assert row["total"] == pytest.approx(
        0.5 + row["level2_ratio"] + row["level3_unique"] + 0.6 * row["jaccard"]
    )


def test_transition_score_steps():
    assert transition_score("plain words only") == 0.0
    assert transition_score("however it rained") == pytest.approx(0.4)
    assert transition_score("however it rained; for example today") == pytest.approx(0.5)
    assert transition_score(DETAILED) == 1.0


def _words(prefix, n):
    return " ".join(f"{prefix}{i}" for i in range(n))


SHARED = "graph network message passing heterophily benchmark nodes edges layer filters"


def arxiv_pair():
    background = f"{SHARED} " + _words("context", 140)
    method = (
        "First, in addition, for example, because, however, indeed, overall, "
        + f"{SHARED} "
        + _words("approach", 140)
    )
    return background, method


def test_arxiv_perfect_pair_and_failure_levels():
    bundle = ARXIV.build(TaskSpec())
    background, method = arxiv_pair()
    row = score(bundle, background, method)
    assert row["total"] == bundle.reward_func.reward_range[1] == 3.0
    assert score(bundle, "short text", method)["total"] == 0.0
    unbalanced = f"{SHARED} " + _words("m", 130)
    row = score(bundle, background, unbalanced)
    assert row["length_ratio"] < 0.8 or row["length_ratio"] > 1.5
    assert row["total"] == 0.5
    repeated = " ".join(["background"] * 140) + " " + SHARED
    row = score(bundle, background, repeated)
    assert row["level2_ratio"] == 1.0 and row["unique_ratio"] < 0.5
    assert row["total"] == 1.5 and row["levels_passed"] == 2


def test_writing_is_single_turn_unless_critique_is_asked():
    bundle = TLDR.build(TaskSpec())
    assert bundle.external_transition is None
    critique = TLDR.build(TaskSpec(external_mode="critique"))
    item = critique.train_dataset[0]
    prompts = critique.external_transition(
        prompt=item["prompt"], agent_completions=["Too short.", DETAILED], num_agents=2
    )
    assert len(prompts) == 2 and "Too short." in prompts[0]
    assert "2 words" in prompts[0] and "8-256 words" in prompts[0]
    with pytest.raises(ValueError, match="2 agents"):
        critique.external_transition(prompt=item["prompt"], agent_completions=["a"], num_agents=1)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text(max_size=400), st.text(max_size=400))
def test_writing_rewards_stay_in_range_on_junk(first, second):
    for bundle in (_TLDR, _ARXIV):
        low, high = bundle.reward_func.reward_range
        value = bundle.reward_func([first], [second], batch_items=[bundle.train_dataset[0]])[0]
        assert low <= value <= high


_TLDR = TLDR.build(TaskSpec())
_ARXIV = ARXIV.build(TaskSpec())
