"""When an agent's trained weights go to its vLLM engine.

Every optimizer step of an agent counts (:meth:`WeightSync.stepped`, from the backend's
``on_weights_updated``); the push happens lazily, right before the agent's next rollout, once
``interval`` steps have accumulated since the last push. With ``interval=1`` (the default)
every rollout samples from the latest weights, however many steps ran in between, for the cost
of one push; a larger interval samples from weights up to ``interval - 1`` steps old (the
losses still score with the current model, so only the samples are slightly off-policy).
"""

from __future__ import annotations

from collections.abc import Sequence


class WeightSync:
    """Per agent, the optimizer steps not yet pushed and whether a push is due."""

    def __init__(self, agents: Sequence[int], interval: int = 1):
        if not isinstance(interval, int) or isinstance(interval, bool) or interval < 1:
            raise ValueError(
                f"rollout_backend_options.weight_sync_interval must be an integer >= 1, got "
                f"{interval!r}."
            )
        self.interval = interval
        self._unpushed = {a: 0 for a in agents}
        self.pushes = {a: 0 for a in agents}

    def stepped(self, agent: int) -> None:
        """``agent`` took an optimizer step."""
        self._unpushed[agent] += 1

    def unpushed(self, agent: int) -> int:
        """Steps of ``agent`` its engine has not seen."""
        return self._unpushed[agent]

    def due(self, agent: int) -> bool:
        """Whether ``agent``'s weights must be pushed before its next rollout."""
        return self._unpushed[agent] >= self.interval

    def pushed(self, agent: int) -> None:
        """The engine now holds ``agent``'s latest weights."""
        self._unpushed[agent] = 0
        self.pushes[agent] += 1
