"""Checkpoint and resume: two tiny agents train for 2 epochs, then a new trainer picks the run
up from its checkpoint and trains 2 more.

    python examples/resume_training.py                     # writes runs/resume-demo-<time>/
    WANDB_MODE=offline python examples/resume_training.py --wandb

Both parts write to one ``metrics.jsonl`` and, with ``--wandb``, to one W&B run: the second part
continues the log and the run id exactly where the checkpoint left them. The same works from the
command line with ``comlrl train --resume``.
"""

from __future__ import annotations

import argparse
import os
import time

from comlrl.core.testing import tiny_model_dir
from comlrl.reinforce import MAGRPOConfig, MAGRPOTrainer

TOPICS = ["a cat", "the sea", "a robot", "winter", "a dragon", "the moon", "a river", "a key"]


def length_ratio_reward(completions1, completions2):
    """1.0 when the second answer is 2 to 3 times as long as the first, less the further off."""
    rewards = []
    for first, second in zip(completions1, completions2):
        ratio = len(second) / max(1, len(first))
        rewards.append(1.0 if 2.0 <= ratio <= 3.0 else 1.0 / (1.0 + abs(ratio - 2.5)))
    return rewards


def make_trainer(run_dir: str, epochs: int, use_wandb: bool) -> MAGRPOTrainer:
    """The same trainer for both parts; only ``num_train_epochs`` differs (it may grow)."""
    args = MAGRPOConfig(
        num_train_epochs=epochs,
        num_turns=1,
        num_generations=2,
        max_new_tokens=16,
        temperature=1.0,
        top_p=1.0,
        agent_learning_rate=1e-3,
        rollout_buffer_size=2,
        logging_steps=1,
        eval_interval=4,
        eval_num_samples=2,
        seed=0,
        output_dir=run_dir,
    )
    wandb_config = None
    if use_wandb:  # a wandb_config turns W&B on (report_to's default, "auto")
        wandb_config = {"project": "comlrl-examples", "name": "resume-demo", "dir": run_dir}
    return MAGRPOTrainer(
        agent_model=tiny_model_dir(),
        num_agents=2,
        train_dataset=[{"prompt": f"Write a story about {t}."} for t in TOPICS],
        eval_dataset=[{"prompt": "Write a story about a garden."}],
        reward_func=length_ratio_reward,
        wandb_config=wandb_config,
        args=args,
    )


def main(argv: list[str] | None = None) -> dict:
    """Run both parts; returns the run dir, both parts' W&B run ids and the last checkpoint."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", default=None, help="where logs and checkpoints go")
    parser.add_argument("--wandb", action="store_true", help="also log to W&B (honours WANDB_MODE)")
    args = parser.parse_args(argv)
    run_dir = args.run_dir or os.path.join("runs", f"resume-demo-{time.strftime('%Y%m%d-%H%M%S')}")
    checkpoints = os.path.join(run_dir, "checkpoints")

    first = make_trainer(run_dir, epochs=2, use_wandb=args.wandb)
    first.verbose = False
    first.train(checkpoint_dir=checkpoints, checkpoint_total_limit=2)
    first_id = first.reporting.logger.wandb_run_id
    first.reporting.logger.close()  # part one ends here, as if the job had been stopped
    print(f"part 1: 2 epochs done, checkpoint {first.run_state.last_checkpoint}")

    second = make_trainer(run_dir, epochs=4, use_wandb=args.wandb)
    second.verbose = False
    second.train(
        resume_from_checkpoint="latest", checkpoint_dir=checkpoints, checkpoint_total_limit=2
    )
    second_id = second.reporting.logger.wandb_run_id
    second.save_model(os.path.join(run_dir, "agents"))
    second.reporting.logger.close()
    print(f"part 2: resumed and finished epoch 4, checkpoint {second.run_state.last_checkpoint}")
    print(f"metrics: {os.path.join(run_dir, 'metrics.jsonl')}; W&B run id: {second_id}")
    return {
        "run_dir": run_dir,
        "wandb_run_ids": [first_id, second_id],
        "checkpoint": second.run_state.last_checkpoint,
    }


if __name__ == "__main__":
    main()
