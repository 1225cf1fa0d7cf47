"""Weights & Biases sink. ``wandb`` is imported only when ``report_to`` names it."""

from __future__ import annotations

import os
from typing import Any

from comlrl.core.config.redact import redact
from comlrl.core.errors import missing_package

_INIT_KEYS = ("project", "entity", "dir", "tags", "id", "resume", "mode", "group", "notes")


def wandb_init_kwargs(
    wandb_config: dict[str, Any], run_config: dict[str, Any], default_name: str
) -> dict[str, Any]:
    """Arguments for ``wandb.init`` from a user's ``wandb_config`` and the run's config.

    Recognised keys: project (default "comlrl"), entity, name or run_name, dir (created), tags,
    id, resume, mode, group, notes, and config_sections (merged into the logged config).
    Secret-looking values of the logged config are redacted (see ``comlrl.core.config.redact``).
    """
    cfg = dict(wandb_config)
    kwargs: dict[str, Any] = {"project": cfg.get("project") or "comlrl"}
    for key in _INIT_KEYS[1:]:
        if cfg.get(key) is not None:
            kwargs[key] = cfg[key]
    if "tags" in kwargs and not isinstance(kwargs["tags"], list):
        kwargs.pop("tags")
    kwargs["name"] = cfg.get("name") or cfg.get("run_name") or default_name
    if kwargs.get("dir"):
        os.makedirs(kwargs["dir"], exist_ok=True)
    config = dict(run_config)
    sections = cfg.get("config_sections") or {}
    config.update(sections)
    dataset = sections.get("dataset") if isinstance(sections, dict) else None
    if isinstance(dataset, dict):
        config.setdefault("dataset_name", dataset.get("name"))
        config.setdefault("dataset_type", dataset.get("type"))
    kwargs["config"] = redact(config)  # W&B stores and uploads it: no secrets
    return kwargs


class WandbSink:
    """Logs metrics to one W&B run, a sink like any other with a run to open and finish.

    Built with its options (the run's ``wandb_config``), the run's config and a default name (the
    run directory's); :meth:`start` opens the run (continuing ``resume_id`` when a checkpoint
    carries one) and returns its id, which checkpoints keep. :meth:`close` leaves the run open so
    that ``save_model`` can still log to it after ``train()``; :meth:`finish` ends it.
    """

    def __init__(self, options: dict[str, Any], run_config: dict[str, Any], default_name: str):
        try:
            import wandb
        except ImportError as exc:
            raise missing_package("wandb") from exc
        self._wandb = wandb
        self._init_kwargs = wandb_init_kwargs(options, run_config, default_name)
        self.run: Any = None  # a wandb Run once started
        self.run_id: str | None = None

    def start(self, resume_id: str | None = None) -> str | None:
        """Open the run (once); returns its id."""
        if self.run is None:
            kwargs = dict(self._init_kwargs)
            if resume_id is not None and "id" not in kwargs:
                kwargs["id"] = resume_id
                kwargs.setdefault("resume", "allow")
            self.run = self._wandb.init(**kwargs)
            self.run_id = self.run.id
        return self.run_id

    def describe(self) -> str:
        """Where this sink writes, for the run's first lines: project, run name, mode."""
        kw = self._init_kwargs
        where = f"W&B (project {kw['project']!r}, run {kw['name']!r}"
        mode = kw.get("mode") or os.environ.get("WANDB_MODE")
        return where + (f", mode {mode})" if mode else ")")

    def write(self, metrics: dict[str, Any], step: int) -> None:
        """Log ``metrics`` at ``step``."""
        self.start()
        self.run.log(dict(metrics), step=int(step))

    def log_table(self, key: str, columns: list[str], data: list[list[Any]], step: int) -> None:
        """Log a ``wandb.Table`` of ``data`` rows under ``key`` at ``step``."""
        self.start()
        header: list[str | int] = list(columns)  # what wandb.Table's signature names
        self.run.log({key: self._wandb.Table(columns=header, data=data)}, step=int(step))

    def log_html(self, figures: dict[str, str], step: int) -> None:
        """Log each HTML or SVG text of ``figures`` as a ``wandb.Html`` under its key."""
        self.start()
        self.run.log({key: self._wandb.Html(text) for key, text in figures.items()}, step=int(step))

    def close(self) -> None:
        """Nothing to release until :meth:`finish`: the run outlives ``train()``."""

    def finish(self) -> None:
        """Finish the run."""
        if self.run is not None:
            self.run.finish()
            self.run = None


def wandb_sink(run_dir: str | None, run_config: dict[str, Any], options: dict[str, Any]):
    """The ``report_to: [wandb]`` factory: a run named after ``run_dir`` unless ``options``
    (the ``wandb_config``) names it."""
    name = os.path.basename(os.path.normpath(run_dir)) if run_dir else "comlrl"
    return WandbSink(options, run_config, name)
