"""A helper base class that turns a task's pieces into a :class:`TaskBundle`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from comlrl.core.task import TaskBundle, TaskSpec
from comlrl.tasks.common.data import builtin_rows, limit_rows, load_rows
from comlrl.tasks.common.evaluation import make_eval_hooks
from comlrl.tasks.common.lookup import ItemIndex
from comlrl.tasks.common.prompting import build_formatters
from comlrl.tasks.common.rewards import Scorer, make_reward
from comlrl.tasks.common.transitions import make_critique_transition

COMMON_OPTIONS = frozenset({"chat_template", "system_prompt"})
NO_TRANSITION = (None, "none", "")


class BaseTask:
    """Shared ``build`` flow; subclasses fill in data, prompts, scoring and transitions.

    Subclasses set ``name``, ``description``, ``num_agents``, ``agent_counts`` (allowed agent
    numbers, None for any >= 1), ``sample_package``/``sample_file`` (the built-in sample),
    ``default_train_split``/``default_eval_split``, ``option_defaults`` (task-specific options
    and their defaults) and ``reward_bounds``; and implement :meth:`normalize`,
    :meth:`renders` and :meth:`scorer`. :meth:`transition` offers the generic ``critique`` mode;
    tasks add their own modes by overriding it. The option ``hub_config`` (when a task lists
    it) names the hub dataset's configuration.
    """

    name: str = ""
    description: str = ""
    num_agents: int = 2
    agent_counts: tuple[int, ...] | None = (2,)
    sample_package: str = ""
    sample_file: str = ""
    default_train_split: str = "train"
    default_eval_split: str = "test"
    hub_config: str | None = None
    option_defaults: dict[str, Any] = {}
    reward_bounds: tuple[float, float] = (0.0, 1.0)
    transition_modes: tuple[str, ...] = ("critique",)

    # ----- hooks for subclasses -------------------------------------------------------------
    def normalize(self, row: dict) -> dict:
        """Map a raw dataset row to the task's row format (must include ``prompt``)."""
        raise NotImplementedError

    def renders(self, num_agents: int, options: dict[str, Any]) -> list[Callable[[dict], str]]:
        """One instruction writer per agent: row -> plain instruction text."""
        raise NotImplementedError

    def scorer(self, num_agents: int, options: dict[str, Any]) -> Scorer:
        """The batch scorer behind the reward (one breakdown dict per joint sample)."""
        raise NotImplementedError

    def aliases(self) -> dict[str, Callable[[str], list[dict]]]:
        """Offline dataset names this task understands besides hub ids and paths."""
        return {}

    def critique_notes(self, reward: Callable, options: dict[str, Any]):
        """Per-agent notes for the generic critique transition (None for no notes)."""
        return None

    def transition(
        self,
        mode: str,
        *,
        renders,
        index: ItemIndex,
        reward: Callable,
        scorer: Scorer,
        options: dict[str, Any],
        num_agents: int,
    ):
        """The external transition for ``mode`` (already checked to be in ``transition_modes``)."""
        return make_critique_transition(
            renders,
            index=index,
            name=f"{self.name}_critique",
            notes=self.critique_notes(reward, options),
        )

    # ----- shared flow ----------------------------------------------------------------------
    @property
    def option_names(self) -> frozenset[str]:
        """Every ``task.options`` key this task accepts (run files are checked against it)."""
        return frozenset(self.option_defaults) | COMMON_OPTIONS

    def options(self, raw: dict[str, Any] | None) -> dict[str, Any]:
        """Task options with defaults filled in; unknown keys are rejected."""
        raw = dict(raw or {})
        known = self.option_names
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ValueError(
                f"task.options for {self.name!r} has unknown keys {unknown}; valid keys "
                f"are {sorted(known)}."
            )
        merged = {"chat_template": "auto", "system_prompt": None, **self.option_defaults}
        merged.update(raw)
        return merged

    def check_agents(self, num_agents: Any) -> int:
        """Validate the agent count for this task."""
        if isinstance(num_agents, bool) or not isinstance(num_agents, int) or num_agents < 1:
            raise ValueError(f"num_agents must be a positive integer, got {num_agents!r}.")
        if self.agent_counts is not None and num_agents not in self.agent_counts:
            raise ValueError(
                f"num_agents={num_agents} is not supported by task {self.name!r}; "
                f"use one of {list(self.agent_counts)}."
            )
        return num_agents

    def builtin(self, split: str) -> list[dict]:
        """Rows of the shipped sample for ``split``."""
        return builtin_rows(self.sample_package, self.sample_file, split)

    def load(
        self,
        source: str | None,
        split: str,
        limit: int | None,
        field: str,
        hub_config: str | None = None,
    ) -> list[dict]:
        """Load, normalize and limit the rows of one split."""
        rows = load_rows(
            source,
            split,
            builtin=self.builtin,
            hub_config=hub_config or self.hub_config,
            aliases=self.aliases(),
        )
        rows = limit_rows(rows, limit, field)
        if not rows:
            raise ValueError(f"dataset split {split!r} of task {self.name!r} is empty.")
        return [self.normalize(row) for row in rows]

    def build(self, spec: TaskSpec) -> TaskBundle:
        """Load data and construct formatters, reward, transition and eval hooks for ``spec``."""
        num_agents = self.check_agents(spec.num_agents)
        options = self.options(spec.options)
        mode = spec.external_mode
        if isinstance(mode, str):
            mode = mode.strip().lower()
        if mode not in NO_TRANSITION and mode not in self.transition_modes:
            raise ValueError(
                f"external.mode {spec.external_mode!r} is not supported by task "
                f"{self.name!r}; use one of {list(self.transition_modes)} or null."
            )
        train = self.load(
            spec.dataset_name,
            spec.train_split or self.default_train_split,
            spec.train_limit,
            "dataset.train_limit",
            options.get("hub_config"),
        )
        evaluation = self.load(
            spec.dataset_name,
            spec.eval_split or self.default_eval_split,
            spec.eval_limit,
            "dataset.eval_limit",
            options.get("hub_config"),
        )
        renders = self.renders(num_agents, options)
        formatters = build_formatters(renders, tokenizer=spec.tokenizer, options=options)
        index = ItemIndex(train + evaluation, renders)
        for row in train + evaluation:
            index.add(row, formatters)
        low, high = self.reward_bounds
        scorer = self.scorer(num_agents, options)
        reward = make_reward(
            scorer,
            num_agents=num_agents,
            low=low,
            high=high,
            index=index,
            name=f"{self.name}_reward",
        )
        transition = None
        if mode not in NO_TRANSITION:
            transition = self.transition(
                mode,
                renders=renders,
                index=index,
                reward=reward,
                scorer=scorer,
                options=options,
                num_agents=num_agents,
            )
        eval_logger, eval_aggregator = make_eval_hooks(reward, index, num_agents)
        return TaskBundle(
            train_dataset=train,
            eval_dataset=evaluation,
            formatters=formatters,
            reward_func=reward,
            external_transition=transition,
            eval_logger=eval_logger,
            eval_aggregator=eval_aggregator,
        )
