"""Compatible import path ``comlrl.utils.wandb_utils``."""

from __future__ import annotations

from typing import Any

from comlrl.core.compat.helpers import verbose_from_wandb_config
from comlrl.core.logging.wandb_sink import wandb_init_kwargs as _init_kwargs


def wandb_init_kwargs(
    wandb_config: dict[str, Any], run_config: dict[str, Any], default_name: str | None = None
) -> dict[str, Any]:
    """Arguments for ``wandb.init`` (1.4.3's two-argument form; the run name is optional).

    Unlike 1.4.3, ``run_config`` is not modified: the ``config_sections`` are merged into the
    returned ``config`` only.
    """
    return _init_kwargs(wandb_config, run_config, default_name)


__all__ = ["verbose_from_wandb_config", "wandb_init_kwargs"]
