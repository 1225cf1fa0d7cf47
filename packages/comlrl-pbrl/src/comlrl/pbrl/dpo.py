"""The joint-factorized DPO objective.

The joint policy factorizes over actors, ``log pi(y|x) = sum_i log pi_i(y_i|x_i)``, so the joint
log-ratio of a pair is the sum of the actors' margins

    delta_i = [log pi_i(y_w^i) - log pi_i(y_l^i)] - [log ref_i(y_w^i) - log ref_i(y_l^i)]

(the bracket with ``ref`` is zero when reference-free), and the loss of a batch is

    L = mean_p  -log sigmoid(beta * sum_i delta_i(p)).

Actor ``i``'s parameters enter only ``delta_i``, so the gradient of this single joint loss with
respect to actor ``i`` equals that of CoMLRL's per-actor loss
``-log sigmoid(beta * (delta_i + sum_{j != i} sg[delta_j]))``: one backward serves every actor.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from comlrl.core.algos import register_preference_loss


@dataclass
class DPOOutput:
    """The loss and the per-pair quantities it was built from (detached copies for logging)."""

    loss: torch.Tensor
    margins: torch.Tensor
    actor_margins: list[torch.Tensor]
    chosen: list[torch.Tensor]
    rejected: list[torch.Tensor]

    def metrics(self, beta: float) -> dict[str, float]:
        """Loss, preference accuracy, margins and chosen/rejected log-probs."""
        m = self.margins
        out = {
            "dpo/loss": float(self.loss.detach()),
            "dpo/accuracy": float((m > 0).float().mean()),
            "dpo/margin": float(m.mean()),
            "dpo/reward_margin": float(beta * m.mean()),
            "dpo/chosen_logp": float(torch.stack([c.mean() for c in self.chosen]).sum()),
            "dpo/rejected_logp": float(torch.stack([r.mean() for r in self.rejected]).sum()),
        }
        for i, (c, r, d) in enumerate(zip(self.chosen, self.rejected, self.actor_margins)):
            out[f"agent_{i}/chosen_logp"] = float(c.mean())
            out[f"agent_{i}/rejected_logp"] = float(r.mean())
            out[f"agent_{i}/margin"] = float(d.mean())
        return out


def actor_margins(
    chosen: Sequence[torch.Tensor],
    rejected: Sequence[torch.Tensor],
    ref_chosen: Sequence[torch.Tensor] | None = None,
    ref_rejected: Sequence[torch.Tensor] | None = None,
) -> list[torch.Tensor]:
    """``delta_i`` per actor (``[B]`` each), on the first actor's device."""
    device = chosen[0].device
    out = []
    for i, (c, r) in enumerate(zip(chosen, rejected)):
        d = c.to(device) - r.to(device)
        if ref_chosen is not None and ref_rejected is not None:
            d = d - (ref_chosen[i].to(device) - ref_rejected[i].to(device))
        out.append(d)
    return out


@register_preference_loss("sigmoid")
def joint_dpo_loss(
    chosen: Sequence[torch.Tensor],
    rejected: Sequence[torch.Tensor],
    beta: float,
    ref_chosen: Sequence[torch.Tensor] | None = None,
    ref_rejected: Sequence[torch.Tensor] | None = None,
) -> DPOOutput:
    """The joint DPO loss from per-actor sequence log-probs of winners and losers (``[B]`` each)."""
    deltas = actor_margins(chosen, rejected, ref_chosen, ref_rejected)
    margins = torch.stack(deltas).sum(0)
    loss = -F.logsigmoid(beta * margins).mean()
    return DPOOutput(
        loss=loss,
        margins=margins.detach(),
        actor_margins=[d.detach() for d in deltas],
        chosen=[c.detach().float() for c in chosen],
        rejected=[r.detach().float() for r in rejected],
    )
