"""Add a policy loss: one registered function, chosen by name in the config.

This is a sequence-level ratio loss in the style of GSPO: each completion's importance ratio is
the exponentiated mean of its per-token log-ratios to the rollout policy, clipped PPO-style.
Because it declares ``needs_old_logps=True``, MAGRPO keeps every completion's per-token
log-probs at rollout and passes them in as ``old_logps``.

Run:  uv run --frozen python examples/extending/custom_loss.py
"""

import argparse
import sys
from pathlib import Path

import torch

from comlrl.core.algos import register_policy_loss

sys.path.insert(0, str(Path(__file__).parent))


@register_policy_loss("sequence_ratio", needs_old_logps=True)
def sequence_ratio_loss(logps, old_logps, advantages, row_weights, config):
    """``-sum_r w_r * min(s_r * A_r, clip(s_r, 1 - 0.2, 1 + 0.2) * A_r)`` with the sequence
    ratio ``s_r = exp(mean_t(log pi - log pi_old))``."""
    mask = logps.mask
    lengths = mask.sum(-1).clamp(min=1)
    ratio = (((logps.values - old_logps) * mask).sum(-1) / lengths).exp()
    clipped = ratio.clamp(0.8, 1.2)
    per_row = -torch.minimum(ratio * advantages, clipped * advantages)
    loss = (row_weights * per_row).sum()
    clip_fraction = ((ratio - clipped).abs() > 0).float().mean().item()
    return loss, {"clip_fraction": clip_fraction, "ratio_mean": ratio.mean().item()}


def main(argv=None):
    from _common import tiny_run

    from comlrl.reinforce import MAGRPOConfig, MAGRPOTrainer

    parser = argparse.ArgumentParser(description="MAGRPO with a registered custom loss.")
    parser.add_argument("--out", default="runs/custom_loss")
    args = parser.parse_args(argv)
    trainer = tiny_run(MAGRPOTrainer, MAGRPOConfig, args.out, policy_loss="sequence_ratio")
    trainer.train()
    return trainer


if __name__ == "__main__":
    main()
