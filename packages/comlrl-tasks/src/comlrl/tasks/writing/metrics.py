"""Text statistics the writing rewards are built from."""

from __future__ import annotations

import re

_WORD_RE = re.compile(r"[a-z0-9']+")

# Our own lists of connective phrases, grouped by the job they do in a text.
TRANSITION_CATEGORIES: dict[str, tuple[str, ...]] = {
    "elaboration": ("in addition", "furthermore", "moreover", "additionally", "besides", "also"),
    "examples": ("for example", "for instance", "such as", "to illustrate", "namely"),
    "explanation": ("in other words", "that is", "this means", "specifically", "to clarify"),
    "cause_effect": (
        "because",
        "therefore",
        "as a result",
        "consequently",
        "thus",
        "hence",
        "due to",
    ),
    "contrast": ("however", "on the other hand", "in contrast", "nevertheless", "instead", "but"),
    "sequence": ("first", "second", "then", "next", "finally", "afterwards", "subsequently"),
    "emphasis": ("indeed", "in fact", "especially", "notably", "above all", "importantly"),
    "summary": ("in summary", "in short", "overall", "to sum up", "in conclusion", "all in all"),
    "comparison": ("similarly", "likewise", "in the same way", "compared to", "just as"),
    "concession": ("although", "even though", "despite", "admittedly", "even so", "granted"),
    "condition": ("if", "unless", "provided that", "as long as", "in case"),
    "time": ("meanwhile", "later", "eventually", "before", "after", "during", "when"),
}
_CATEGORY_RES = {
    name: re.compile(r"\b(?:" + "|".join(re.escape(p) for p in phrases) + r")\b", re.IGNORECASE)
    for name, phrases in TRANSITION_CATEGORIES.items()
}

STOPWORDS = frozenset(
    "a an the and or but if then so of to in on at by for with from as is are was were be been "
    "being it its this that these those i me my we our you your he him his she her they them "
    "their there here not no do does did have has had will would can could should may might "
    "just than too very into over about up down out what which who whom when where why how all "
    "any both each few more most other some such only own same again once".split()
)


def token_count(text: str) -> int:
    """Whitespace-separated tokens (the unit of the length windows)."""
    return len(text.split())


def words(text: str) -> list[str]:
    """Lower-case word tokens (letters, digits and apostrophes)."""
    return _WORD_RE.findall(text.lower())


def unique_word_count(text: str) -> int:
    """How many distinct words ``text`` uses."""
    return len(set(words(text)))


def transition_categories(text: str) -> list[str]:
    """The connective categories that occur in ``text``."""
    return [name for name, pattern in _CATEGORY_RES.items() if pattern.search(text)]


def transition_score(text: str) -> float:
    """0 with no connectives; 0.4 for the first category, +0.1 per further one, capped at 1."""
    found = len(transition_categories(text))
    if found == 0:
        return 0.0
    return min(1.0, 0.4 + 0.1 * (found - 1))


def content_jaccard(first: str, second: str) -> float:
    """Jaccard overlap of the two texts' word sets after dropping stopwords."""
    a = {w for w in words(first) if w not in STOPWORDS}
    b = {w for w in words(second) if w not in STOPWORDS}
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def jaccard_score(first: str, second: str, saturation: float = 0.03) -> float:
    """Content overlap mapped to [0, 1]; full marks from ``saturation`` overlap upwards."""
    return min(content_jaccard(first, second), saturation) / saturation


def style_score(first: str, second: str) -> tuple[float, float, float]:
    """``(style, transition, jaccard)`` with style = 0.4 * transition(second) + 0.6 * jaccard."""
    transition = transition_score(second)
    jaccard = jaccard_score(first, second)
    return 0.4 * transition + 0.6 * jaccard, transition, jaccard
