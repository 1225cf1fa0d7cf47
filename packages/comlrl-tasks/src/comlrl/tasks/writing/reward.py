"""Leveled writing rewards: each level is scored only when the previous one passed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from comlrl.tasks.writing.metrics import style_score, token_count, unique_word_count

Band = Callable[[float], "float | None"]  # value -> score, or None when the level fails


def tldr_ratio_band(ratio: float) -> float | None:
    """Detailed/concise character ratio: full marks in [1.6, 3.2], ramps to 1.1 and 5.0."""
    if 1.6 <= ratio <= 3.2:
        return 1.0
    if 1.1 <= ratio < 1.6:
        return (ratio - 1.1) / 0.5
    if 3.2 < ratio <= 5.0:
        return 1.0 - (ratio - 3.2) / 1.8
    return None


def tldr_unique_band(ratio: float) -> float | None:
    """Unique-word ratio: 0.5 from 2.0 up, a ramp from 1.3; below 1.3 the level fails."""
    if ratio >= 2.0:
        return 0.5
    if ratio >= 1.3:
        return 0.5 * (ratio - 1.3) / 0.7
    return None


def arxiv_ratio_band(ratio: float) -> float | None:
    """Methods/background character ratio: full marks in [1.0, 1.3], ramps to 0.8 and 1.5."""
    if 1.0 <= ratio <= 1.3:
        return 1.0
    if 0.8 <= ratio < 1.0:
        return (ratio - 0.8) / 0.2
    if 1.3 < ratio <= 1.5:
        return 1.0 - (ratio - 1.3) / 0.2
    return None


def arxiv_unique_band(ratio: float) -> float | None:
    """Unique-word ratio: 0.5 in [0.7, 1.3], ramps to 0.5 and 1.7; outside the level fails."""
    if 0.7 <= ratio <= 1.3:
        return 0.5
    if 0.5 <= ratio < 0.7:
        return 0.5 * (ratio - 0.5) / 0.2
    if 1.3 < ratio <= 1.7:
        return 0.5 * (1.7 - ratio) / 0.4
    return None


@dataclass(frozen=True)
class WritingLevels:
    """Parameters of one leveled writing reward (max 0.5 + 1 + 0.5 + 1 = 3.0)."""

    min_tokens: int
    max_tokens: int
    ratio_band: Band
    unique_band: Band

    def score(self, first: str, second: str) -> dict[str, float]:
        """Per-level breakdown of a (first agent, second agent) pair; ``total`` is the reward."""
        first, second = first.strip(), second.strip()
        out = {
            "level1_length": 0.0,
            "level2_ratio": 0.0,
            "level3_unique": 0.0,
            "level4_style": 0.0,
            "tokens_agent0": float(token_count(first)),
            "tokens_agent1": float(token_count(second)),
            "length_ratio": 0.0,
            "unique_ratio": 0.0,
            "transition": 0.0,
            "jaccard": 0.0,
            "levels_passed": 0.0,
        }
        window = range(self.min_tokens, self.max_tokens + 1)
        if token_count(first) not in window or token_count(second) not in window:
            return self._total(out)
        out["level1_length"], out["levels_passed"] = 0.5, 1.0
        out["length_ratio"] = ratio = len(second) / len(first)
        ratio_score = self.ratio_band(ratio)
        if ratio_score is None:
            return self._total(out)
        out["level2_ratio"], out["levels_passed"] = ratio_score, 2.0
        unique_first = unique_word_count(first)
        out["unique_ratio"] = unique = (
            unique_word_count(second) / unique_first if unique_first else 0.0
        )
        unique_score = self.unique_band(unique)
        if unique_score is None:
            return self._total(out)
        out["level3_unique"], out["levels_passed"] = unique_score, 3.0
        style, transition, jaccard = style_score(first, second)
        out.update(level4_style=style, transition=transition, jaccard=jaccard, levels_passed=4.0)
        return self._total(out)

    @staticmethod
    def _total(out: dict[str, float]) -> dict[str, float]:
        out["total"] = (
            out["level1_length"] + out["level2_ratio"] + out["level3_unique"] + out["level4_style"]
        )
        return out


TLDR_LEVELS = WritingLevels(8, 256, tldr_ratio_band, tldr_unique_band)
ARXIV_LEVELS = WritingLevels(128, 256, arxiv_ratio_band, arxiv_unique_band)
WRITING_MAX = 3.0


def pair_scorer(levels: WritingLevels):
    """A batch scorer over (agent 0, agent 1) completions using ``levels``."""

    def score(columns: list[list[str]], items: list[dict]) -> list[dict[str, float]]:
        return [levels.score(a, b) for a, b in zip(columns[0], columns[1])]

    return score


def writing_notes(levels: WritingLevels, targets: tuple[str, str]):
    """Critique notes from the failed level, for the generic critique transition."""

    def notes(item: dict, completions: list[str]) -> list[list[str]]:
        row = levels.score(completions[0], completions[1])
        passed = int(row["levels_passed"])
        window = f"{levels.min_tokens}-{levels.max_tokens} words"
        if passed == 0:
            return [
                [f"Your text has {int(row['tokens_agent0'])} words; write {window}."],
                [f"Your text has {int(row['tokens_agent1'])} words; write {window}."],
            ]
        if passed == 1:
            ratio = row["length_ratio"]
            return [
                [f"The other text is {ratio:.2f}x as long as yours; {targets[0]}."],
                [f"Your text is {ratio:.2f}x as long as the other one; {targets[1]}."],
            ]
        if passed == 2:
            return [
                [],
                [
                    f"Your text uses {row['unique_ratio']:.2f}x the distinct words of the "
                    "other one; vary your vocabulary."
                ],
            ]
        tips = (
            []
            if row["transition"] >= 1.0
            else ["Link your ideas with more kinds of transition words."]
        )
        return [[], tips]

    return notes
