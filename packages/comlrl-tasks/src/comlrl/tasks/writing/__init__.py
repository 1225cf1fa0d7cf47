"""Writing tasks: TLDR summaries (concise vs. detailed) and arXiv introductions."""
