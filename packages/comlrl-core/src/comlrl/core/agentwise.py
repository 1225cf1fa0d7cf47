"""A joint loss backpropagated one agent at a time.

Some losses couple every agent (the joint DPO margin sums every agent's log-ratio), yet each
agent's parameters enter only through that agent's own scores ``s_i``. The plain way builds
every agent's forward graph, then runs one backward: the activations of all N agents are alive
together, so the peak grows with N. Here the step instead

1. scores every agent without gradients, recording the random state before each forward;
2. builds the loss on detached copies of those scores and backpropagates it to them, which
   gives ``g_i = dL/ds_i`` (cheap: no model in that graph);
3. for each agent alone, scores again with gradients from the same random state (the same
   dropout draw) and backpropagates ``sum(s_i * g_i)``, whose gradient with respect to agent
   ``i``'s parameters is ``g_i * ds_i/dtheta_i`` = ``dL/dtheta_i`` by the chain rule.

The gradients equal the joint backward's; one agent's graph is alive at a time, for one extra
forward per agent without gradients. :func:`comlrl.core.train_step.accumulate_gradients` runs
step 3 (the only backward passes are in core).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import torch

from comlrl.core.checkpoint.rng import capture_rng, restore_rng

# ``scores(grad)``: one agent's scores, with or without gradients.
Scores = Callable[[bool], torch.Tensor]


@dataclass
class AgentwiseLoss:
    """A loss built on detached agent scores, with what it takes to backpropagate it agent by
    agent (:func:`agentwise_loss` builds it)."""

    loss: torch.Tensor
    scores: list[torch.Tensor]
    rescore: list[Scores]
    states: list[Any]
    after: Any

    def backward(self, context: Callable[[], AbstractContextManager]) -> None:
        """The agent-by-agent backward; each forward again runs under ``context()`` (the
        step's autocast)."""
        self.loss.backward()
        for score, leaf, state in zip(self.rescore, self.scores, self.states):
            if leaf.grad is None:
                continue
            restore_rng(*state)
            with context(), torch.enable_grad():
                values = score(True)
            if values.requires_grad:
                (values * leaf.grad.to(values.dtype)).sum().backward()
        restore_rng(*self.after)


def agentwise_loss(
    scores: Sequence[Scores], loss_of: Callable[[list[torch.Tensor]], torch.Tensor]
) -> AgentwiseLoss:
    """Score each agent without gradients (``scores[i](False)``), then the loss
    ``loss_of(values)`` on leaf copies of the values; the returned object's backward is agent by
    agent (see the module docstring). Each ``scores[i]`` must be repeatable: ``scores[i](True)``
    from the same random state returns the same values, now with gradients."""
    states, leaves = [], []
    for score in scores:
        states.append(capture_rng())
        with torch.no_grad():
            values = score(False)
        leaves.append(values.detach().requires_grad_(True))
    after = capture_rng()
    return AgentwiseLoss(loss_of(leaves), leaves, list(scores), states, after)
