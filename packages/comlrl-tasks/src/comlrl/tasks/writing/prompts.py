"""Per-agent instructions for the writing tasks (our own wording)."""

from __future__ import annotations


def tldr_concise(item: dict) -> str:
    """Agent 0 of TLDR: a brief summary with only the key facts."""
    return (
        "Summarize the post below in one or two plain sentences. Keep only the key facts, "
        "leave out details and opinions, and do not add anything the post does not say.\n\n"
        f"Post:\n{item['prompt'].strip()}\n\nShort summary:"
    )


def tldr_detailed(item: dict) -> str:
    """Agent 1 of TLDR: a fuller summary with varied vocabulary and linking words."""
    return (
        "Write a detailed summary of the post below. Cover the situation, the people involved "
        "and what the author wants or feels. Use a varied vocabulary, and connect your "
        "sentences with transition words such as 'however', 'because' or 'as a result'.\n\n"
        f"Post:\n{item['prompt'].strip()}\n\nDetailed summary:"
    )


def arxiv_background(item: dict) -> str:
    """Agent 0 of arXiv: the background and motivation part of an introduction."""
    return (
        "Below is the abstract of a research paper. Write the opening of its introduction: "
        "the background of the problem, what earlier work left open, and why it matters. "
        "A co-author writes the part about the method and its implications, so leave those "
        "out. Write 128 to 256 words of continuous prose.\n\n"
        f"Abstract:\n{item['prompt'].strip()}\n\nIntroduction, background and motivation:"
    )


def arxiv_method(item: dict) -> str:
    """Agent 1 of arXiv: the methodology and implications part of an introduction."""
    return (
        "Below is the abstract of a research paper. Write the second half of its "
        "introduction: how the approach works, what the main contributions are, and what "
        "they imply. A co-author writes the background and motivation, so leave those out. "
        "Write 128 to 256 words of continuous prose.\n\n"
        f"Abstract:\n{item['prompt'].strip()}\n\nIntroduction, method and implications:"
    )
