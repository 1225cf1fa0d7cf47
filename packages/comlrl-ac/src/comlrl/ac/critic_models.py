"""Scalar value estimates from transformer hidden states: critics and value heads.

A critic here is a transformer *body* (the backbone a causal LM wraps, loaded with ``AutoModel``)
plus a small :class:`ValueHead`; it never has an LM head, so estimating a value never computes
vocabulary logits. The forwards that read values (a critic's, or a head's on its actor) are
core's (:mod:`comlrl.core.logprobs.values`), shared with every family; this module builds,
loads and saves the critics and heads.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from comlrl.core.logprobs.values import body_hidden, last_token_values
from comlrl.core.models.backbone import backbone_of, hidden_size_of
from comlrl.core.quiet import quiet_hub_progress

VALUE_HEAD_FILE = "value_head.pt"


class ValueHead(nn.Module):
    """Maps a hidden state to one scalar: ``Linear(d, 1)``, or ``Linear(d, h) → tanh →
    Linear(h, 1)`` when ``hidden_dim`` is set. Weights start at N(0, 0.02), biases at 0.

    The head computes in fp32 whatever the backbone's dtype, and outside any autocast (under
    ``bf16=True`` too), since a regression target in bf16 loses most of its precision.
    """

    def __init__(self, hidden_size: int, hidden_dim: int | None = None):
        super().__init__()
        if hidden_dim:
            self.net: nn.Module = nn.Sequential(
                nn.Linear(hidden_size, hidden_dim), nn.Tanh(), nn.Linear(hidden_dim, 1)
            )
        else:
            self.net = nn.Linear(hidden_size, 1)
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, std=0.02)
                nn.init.zeros_(module.bias)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """``[..., d]`` hidden states → ``[...]`` values."""
        with torch.autocast(hidden.device.type, enabled=False):
            return self.net(hidden.float()).squeeze(-1)

    @property
    def hidden_dim(self) -> int | None:
        """The inner width, or None for a single linear layer."""
        return self.net[0].out_features if isinstance(self.net, nn.Sequential) else None


def head_hidden_dim_of(state: dict[str, torch.Tensor]) -> int | None:
    """The ``hidden_dim`` a saved :class:`ValueHead` state was built with."""
    if "net.weight" in state:
        return None
    if "net.0.weight" in state:
        return int(state["net.0.weight"].shape[0])
    raise ValueError(f"Not a value-head state dict (keys: {sorted(state)[:4]}).")


def load_value_head_state(directory: str | os.PathLike) -> dict[str, torch.Tensor] | None:
    """The value-head weights saved in ``directory``, or None when it holds none.

    Loaded with ``weights_only=True``: only tensors, never arbitrary pickled objects.
    """
    path = os.path.join(os.fspath(directory), VALUE_HEAD_FILE)
    if not os.path.isfile(path):
        return None
    return torch.load(path, map_location="cpu", weights_only=True)


def build_value_head(
    model: nn.Module,
    hidden_dim: int | None,
    saved: dict[str, torch.Tensor] | None = None,
    what: str = "value head",
) -> ValueHead:
    """A head for ``model``'s hidden size; ``saved`` weights are loaded when given.

    A saved head built with another ``hidden_dim`` than the one asked for is an error rather than
    a silently re-initialised head.
    """
    if saved is not None:
        saved_dim = head_hidden_dim_of(saved)
        if hidden_dim is not None and hidden_dim != saved_dim:
            raise ValueError(
                f"The saved {what} has hidden dim {saved_dim}, but {hidden_dim} was asked for; "
                "leave the hidden-dim setting unset (None) or match the saved head."
            )
        hidden_dim = saved_dim
    head = ValueHead(hidden_size_of(model), hidden_dim)
    if saved is not None:
        head.load_state_dict(saved)
    return head


def save_value_head(head: ValueHead, directory: str | os.PathLike) -> None:
    """Write ``directory/value_head.pt`` (a tensor-only state dict)."""
    os.makedirs(directory, exist_ok=True)
    state = {k: v.detach().cpu() for k, v in head.state_dict().items()}
    torch.save(state, os.path.join(os.fspath(directory), VALUE_HEAD_FILE))


class ValueModel(nn.Module):
    """A critic: a transformer body without LM head, plus a :class:`ValueHead`."""

    def __init__(self, backbone: nn.Module, head: ValueHead):
        super().__init__()
        self.backbone = backbone
        self.value_head = head

    @property
    def config(self):
        """The backbone's config."""
        return self.backbone.config

    def hidden_states(self, input_ids, attention_mask, position_ids=None) -> torch.Tensor:
        """Last-layer hidden states ``[B, L, d]``."""
        return body_hidden(self.backbone, input_ids, attention_mask, position_ids)

    def last_token_values(self, rows: Sequence[Sequence[int]], pad_id: int) -> torch.Tensor:
        """The value at the last token of each row (gradients flow unless under no_grad)."""
        return last_token_values(self.backbone, self.value_head, rows, pad_id)


def save_value_model(model: ValueModel, directory: str | os.PathLike) -> None:
    """Write a critic: its body with ``save_pretrained`` (it reloads with ``AutoModel``) and its
    head as ``value_head.pt``; :func:`load_value_model` reads the directory back.

    A function rather than a ``save_pretrained`` method on purpose: generic savers that see
    ``save_pretrained`` assume a Hugging Face model whose state-dict keys ``from_pretrained``
    can read, which a body-plus-head module's keys are not.
    """
    with quiet_hub_progress():
        model.backbone.save_pretrained(directory)
    save_value_head(model.value_head, directory)


def load_value_model(
    source: Any,
    *,
    hidden_dim: int | None = None,
    model_config: dict | None = None,
) -> ValueModel:
    """A critic from a hub id or directory (loaded with ``AutoModel``: no LM head), a causal LM
    or body object (its body is used, trained in place), or a :class:`ValueModel` (as is).

    A directory that holds ``value_head.pt`` (written by :func:`save_value_model`)
    restores the trained head.
    """
    if isinstance(source, ValueModel):
        if hidden_dim is not None and source.value_head.hidden_dim != hidden_dim:
            raise ValueError(
                f"The given critic's value head has hidden dim {source.value_head.hidden_dim}, "
                f"but {hidden_dim} was asked for."
            )
        return source
    saved = None
    if isinstance(source, (str, os.PathLike)):
        from transformers import AutoModel

        from comlrl.core.models import check_model_source, model_load_kwargs, unresolved_model

        check_model_source(source, "critic")
        with quiet_hub_progress(), unresolved_model(source, "critic"):
            backbone = AutoModel.from_pretrained(
                os.fspath(source), **model_load_kwargs(model_config)
            )
        if os.path.isdir(os.fspath(source)):
            saved = load_value_head_state(source)
    elif isinstance(source, nn.Module):
        backbone = backbone_of(source)
    else:
        raise ValueError(
            f"A critic must be a model name, a directory or a model object, got {source!r}."
        )
    return ValueModel(backbone, build_value_head(backbone, hidden_dim, saved, "critic head"))


def load_value_models(
    sources: Sequence[Any], *, hidden_dim: int | None = None, model_config: dict | None = None
) -> list[ValueModel]:
    """One critic per source. A repeated name loads once and is deep-copied (independent
    critics); a repeated object stays one shared critic."""
    by_name: dict[str, ValueModel] = {}
    by_object: dict[int, ValueModel] = {}
    out = []
    for src in sources:
        if isinstance(src, (str, os.PathLike)):
            key = os.fspath(src)
            if key in by_name:
                out.append(copy.deepcopy(by_name[key]))
            else:
                by_name[key] = load_value_model(
                    src, hidden_dim=hidden_dim, model_config=model_config
                )
                out.append(by_name[key])
        else:
            if id(src) not in by_object:
                by_object[id(src)] = load_value_model(
                    src, hidden_dim=hidden_dim, model_config=model_config
                )
            out.append(by_object[id(src)])
    return out
