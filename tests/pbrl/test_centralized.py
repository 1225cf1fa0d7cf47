"""The tagged adapter, the collaboration wrapper, and centralized MADPO."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from comlrl.core.centralized import CentralizedCollaboration
from comlrl.core.logging.jsonl import read_metrics
from comlrl.core.testing import tiny_pair
from comlrl.pbrl import (
    CentralizedComparatorParseError,
    MADPOConfig,
    MADPOTrainer,
    TaggedCentralizedComparatorAdapter,
)

from .helpers import FAST, PROMPTS, moved, ratio_reward, snapshot

ADAPTER = TaggedCentralizedComparatorAdapter()
role_text = st.text(
    alphabet=st.characters(blacklist_characters="<>", blacklist_categories=("Cs",)), max_size=30
)


@settings(max_examples=50, deadline=None)
@given(outputs=st.lists(role_text, min_size=1, max_size=6))
def test_tagged_adapter_round_trips_n_roles(outputs):
    text = ADAPTER.format_completion(outputs)
    assert ADAPTER.parse_completion(text, {}, len(outputs)) == [o.strip() for o in outputs]


def test_parsing_is_lenient_about_case_whitespace_and_missing_roles():
    text = "noise < AGENT_1 >second</agent_1 > then <agent_0>\n first \n</Agent_0>"
    assert ADAPTER.parse_completion(text, {}, 3) == ["first", "second", ""]
    first_only = "<agent_0>a</agent_0><agent_0>b</agent_0>"
    assert ADAPTER.parse_completion(first_only, {}, 1) == ["a"]


@pytest.mark.parametrize(
    "text", ["", "no tags at all", "<agent_0>unclosed", "<agent_7>x</agent_7>"]
)
def test_malformed_text_raises_the_parse_error(text):
    with pytest.raises(CentralizedComparatorParseError):
        ADAPTER.parse_completion(text, {}, 2)
    assert issubclass(CentralizedComparatorParseError, ValueError)


def test_prompt_lists_every_role_and_the_layout():
    prompt = ADAPTER.build_prompt({}, ["write a poem", "write a title"])
    assert "write a poem" in prompt and "write a title" in prompt
    assert "<agent_0>" in prompt and "</agent_1>" in prompt


def test_collaboration_counts_parse_failures_instead_of_raising():
    seen = []

    def reward(a, b):
        seen.append((list(a), list(b)))
        return [float(len(x) + len(y)) for x, y in zip(a, b)]

    collab = CentralizedCollaboration(ADAPTER, [lambda it: it["prompt"]] * 2, 2, reward)
    good = ADAPTER.format_completion(["ab", "cde"])
    scores = collab([good, "garbage"], prompts=["p", "p"], batch_items=[{"prompt": "x"}])
    assert scores == [5.0, 0.0]
    # Two joint actions of two roles: auto mode scores the first alone once, to tell shared
    # values from one joint action's per-role values.
    assert seen == [(["ab", ""], ["cde", ""]), (["ab"], ["cde"])]
    assert (collab.parse_failures, collab.parsed) == (1, 2)
    assert collab.stats()["centralized/parse_failures"] == 1.0


class _Bad:
    def __init__(self, result):
        self.result = result

    def build_prompt(self, item, prompts):
        return "joint"

    def parse_completion(self, completion, item, num_agents):
        return self.result


@pytest.mark.parametrize(
    ("result", "error"), [("one string", TypeError), (["a"], ValueError), (["a", 3], TypeError)]
)
def test_adapter_contract_violations_are_errors(result, error):
    collab = CentralizedCollaboration(_Bad(result), [str, str], 2)
    with pytest.raises(error):
        collab.split("text", {})


def test_empty_joint_prompt_is_rejected():
    adapter = _Bad(["a", "b"])
    adapter.build_prompt = lambda item, prompts: "  "
    with pytest.raises(ValueError, match="non-empty prompt"):
        CentralizedCollaboration(adapter, [str, str], 2).build_prompt({})


class _Halves:
    """Splits a joint completion into halves, so every joint sample scores differently."""

    def build_prompt(self, item, prompts):
        return "Two parts: " + " / ".join(prompts)

    def parse_completion(self, completion, item, num_agents):
        mid = len(completion) // 3
        return [completion[:mid], completion[mid:]]


@pytest.mark.parametrize("adapter", [_Halves(), ADAPTER], ids=["halves", "tagged"])
def test_centralized_madpo_trains_one_joint_actor(tmp_path, adapter):
    model, tok = tiny_pair(seed=4)
    calls = []

    def reward(a, b):
        calls.append(len(a))
        return ratio_reward(a, b)

    cfg = MADPOConfig(
        **FAST,
        collaboration_mode="centralized",
        num_agents=2,
        num_train_epochs=1,
        preference_num_candidates=3,
        output_dir=str(tmp_path / "run"),
    )
    trainer = MADPOTrainer(
        agents=[model],
        tokenizer=tok,
        train_dataset=PROMPTS[:2],
        reward_func=reward,
        args=cfg,
        centralized_comparator_adapter=adapter,
    )
    assert trainer.num_agents == 1 and trainer.num_roles == 2 and trainer.args.num_agents == 2
    before = snapshot(trainer.agents)
    if adapter is ADAPTER:
        # An untrained model never writes the tags: every sample is a counted parse failure,
        # every candidate ties, and there is nothing to train on (a warning, not a crash).
        with pytest.warns(UserWarning, match="no preference pairs"):
            trainer.train()
        assert trainer.collaboration.parse_failures == 2 * 3
    else:
        trainer.train()
        assert trainer.collaboration.parse_failures == 0
        assert trainer.preference_pairs and moved(trainer.agents, before)
        assert all(p.num_actors == 1 for p in trainer.preference_pairs)
    assert calls  # the two-role task reward was called on split outputs
    records = read_metrics(tmp_path / "run" / "metrics.jsonl")
    stats = next(r for r in records if "preference/num_pairs" in r)
    assert stats["centralized/parse_failures"] == trainer.collaboration.parse_failures


def test_centralized_requires_one_actor(tmp_path):
    model, tok = tiny_pair()
    with pytest.raises(ValueError, match="exactly one actor"):
        MADPOTrainer(
            agents=[model, model],
            tokenizer=tok,
            reward_func=ratio_reward,
            args=MADPOConfig(collaboration_mode="centralized", output_dir=str(tmp_path)),
        )
    with pytest.raises(ValueError, match="role count"):
        MADPOTrainer(
            agents=[model],
            num_agents=3,
            tokenizer=tok,
            reward_func=ratio_reward,
            args=MADPOConfig(
                collaboration_mode="centralized", num_agents=2, output_dir=str(tmp_path)
            ),
        )
