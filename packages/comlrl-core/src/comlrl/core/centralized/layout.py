"""Reading the tagged layout of a joint completion, strictly or leniently.

A joint completion holds one ``<tag_i>`` section per role (0-based). The strict reading wants
each section closed (``<tag_i>...</tag_i>``). The lenient reading is for models that get the
layout only partly right: tag names match loosely (any case, spaces, ``_``/``-``/nothing between
the name and the index), a section may stay open (it then ends at the next tag or at the end of
the text), and when the prompt already opened role 0's section, the completion's leading text is
that section. Either way a role whose section is missing or empty reads as ``""`` and counts as
not produced, so a reward can be scaled by the share of the layout that was produced.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PARSE_MODES = ("lenient", "strict")


@dataclass(frozen=True)
class ParsedLayout:
    """The role outputs of one joint completion and which roles' sections were produced."""

    outputs: list[str]
    produced: list[bool]

    @property
    def fraction(self) -> float:
        """Share of the roles whose section was produced (non-empty)."""
        return sum(self.produced) / len(self.produced) if self.produced else 0.0


def check_parse_mode(mode: str, name: str = "mode") -> str:
    """The normalized parse mode; ValueError naming ``name`` otherwise."""
    value = mode.strip().lower() if isinstance(mode, str) else mode
    if value not in PARSE_MODES:
        raise ValueError(f"{name} must be one of {list(PARSE_MODES)}, got {mode!r}.")
    return value


def _strict_pattern(tag: str, index: int) -> re.Pattern:
    name = re.escape(f"{tag}_{index}")
    return re.compile(rf"<\s*{name}\s*>(.*?)<\s*/\s*{name}\s*>", re.IGNORECASE | re.DOTALL)


def _any_tag(tag: str) -> re.Pattern:
    # One pattern for every role's opening and closing tag: group 1 is "/" on a closing tag,
    # group 2 the role index.
    return re.compile(rf"<\s*(/?)\s*{re.escape(tag)}[\s_-]*(\d+)\s*>", re.IGNORECASE)


def parse_strict(completion: str, tag: str, num_roles: int) -> ParsedLayout:
    """The first closed ``<tag_i>...</tag_i>`` section of each role, stripped."""
    outputs, produced = [], []
    for i in range(num_roles):
        match = _strict_pattern(tag, i).search(completion or "")
        outputs.append(match.group(1).strip() if match else "")
        produced.append(match is not None)
    return ParsedLayout(outputs, produced)


def parse_lenient(
    completion: str, tag: str, num_roles: int, first_opened: bool = False
) -> ParsedLayout:
    """Each role's first section, read loosely (see the module docstring).

    ``first_opened`` says that the prompt ended with role 0's opening tag, so text before the
    completion's first tag belongs to role 0 (unless the completion opens role 0 itself).
    """
    text = completion or ""
    tags = list(_any_tag(tag).finditer(text))
    starts: dict[int, list[int]] = {}
    for m in tags:
        role = int(m.group(2))
        if not m.group(1) and role < num_roles:
            starts.setdefault(role, []).append(m.end())
    if first_opened and 0 not in starts:
        starts[0] = [0]
    outputs, produced = [], []
    for i in range(num_roles):
        section = ""
        # The first non-empty section of the role: a tag written twice in a row opens it once.
        for begin in starts.get(i, []):
            end = next((m.start() for m in tags if m.start() >= begin), len(text))
            section = text[begin:end].strip()
            if section:
                break
        outputs.append(section)
        produced.append(bool(section))
    return ParsedLayout(outputs, produced)
