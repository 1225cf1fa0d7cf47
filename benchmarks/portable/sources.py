"""Which models a side trains, read from the spec the same way by every side.

A spec names one ``model_dir`` for every agent (the CPU benchmarks) or, for heterogeneous
agents, one directory per agent in ``agent_dirs`` (all sharing one tokenizer), and optionally a
``critic_dir`` and a ``dtype`` to load the weights in. Written without any comlrl import, so the
reference venv uses it too.
"""

from __future__ import annotations


def agent_dirs(spec: dict) -> list[str]:
    """One model directory per agent."""
    dirs = spec.get("agent_dirs")
    return list(dirs) if dirs else [spec["model_dir"]] * spec["num_agents"]


def critic_dir(spec: dict) -> str:
    """The directory the critics start from."""
    return spec.get("critic_dir") or spec["model_dir"]


def trainer_sources(spec: dict) -> dict:
    """Keyword arguments of a trainer constructor that say what to train and in which dtype:
    ``agent_model`` for identical agents, else ``agents`` plus the shared tokenizer (both
    libraries require a tokenizer with an agent list), and ``model_config`` with the dtype and
    the spec's own ``model_config`` entries (``share_parameters``, say)."""
    out: dict = {}
    model_config = dict(spec.get("model_config") or {})
    if spec.get("dtype"):
        model_config["dtype"] = spec["dtype"]
    if model_config:
        out["model_config"] = model_config
    if not spec.get("agent_dirs"):
        out["agent_model"] = spec["model_dir"]
        return out
    from transformers import AutoTokenizer

    out["agents"] = agent_dirs(spec)
    out["tokenizer"] = AutoTokenizer.from_pretrained(out["agents"][0])
    return out


def load_kwargs(spec: dict) -> dict:
    """``from_pretrained`` keyword arguments for the spec's dtype (none: the library default)."""
    if not spec.get("dtype"):
        return {}
    import torch

    return {"dtype": getattr(torch, spec["dtype"])}
