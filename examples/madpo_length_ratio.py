"""MADPO, then iterative MADPO, on the length-ratio task (CoMLRL-style script).

Two agents answer the same story prompt; the reward is 1 when the second answer is 2-3x as long
as the first. MADPO samples joint candidates from the initial agents once, ranks them by that
reward and runs multi-agent DPO on the pairs. MADPOIter repeats this online: each iteration the
current agents compete with a comparator (here: the agents of the previous iteration).

Run:  uv run --frozen python examples/madpo_length_ratio.py [--model HUB_ID_OR_DIR] [--iterative]
Without --model it uses the tiny offline model and runs on a laptop CPU.
"""

import argparse

from comlrl.core.logging.jsonl import read_metrics
from comlrl.tasks.length_ratio import dataset, length_ratio_reward, story_prompt
from comlrl.trainers.preference import (
    MADPOConfig,
    MADPOIterConfig,
    MADPOIterTrainer,
    MADPOTrainer,
)


def main(argv=None):
    parser = argparse.ArgumentParser(description="MADPO on the length-ratio task.")
    parser.add_argument("--model", default=None, help="hub id or local dir (default: tiny)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--items", type=int, default=8)
    parser.add_argument("--iterative", action="store_true", help="run MADPOIter instead")
    parser.add_argument("--out", default="runs/madpo_tutorial")
    args = parser.parse_args(argv)
    model = args.model
    if model is None:
        from comlrl.core.testing import tiny_model_dir

        model = tiny_model_dir()

    common = dict(
        num_train_epochs=args.epochs,
        max_new_tokens=32,
        temperature=1.0,
        top_p=1.0,
        top_k=None,
        agent_learning_rate=1e-3,  # real model: 5e-6
        train_batch_size=4,
        dpo_beta=0.1,
        logging_steps=1,
        eval_interval=4,
        eval_num_samples=2,
        seed=0,
        output_dir=args.out,
    )
    if args.iterative:
        config = MADPOIterConfig(
            **common,
            num_iterations=2,
            preference_num_candidates=4,
            comparator_num_candidates=4,
            preference_pairs_per_sample=4,
            comparator_policy="history",
            preference_replay_mode="nearest_k",
            preference_replay_k=2,
            log_reward_distribution=True,
        )
        trainer_cls = MADPOIterTrainer
    else:
        config = MADPOConfig(**common, preference_num_candidates=6, preference_pairs_per_sample=4)
        trainer_cls = MADPOTrainer
    trainer = trainer_cls(
        agent_model=model,
        num_agents=2,
        train_dataset=dataset(args.items),
        eval_dataset=dataset(4),
        reward_func=length_ratio_reward,
        formatters=[story_prompt, story_prompt],
        args=config,
    )
    trainer.train()
    trainer.save_model(f"{args.out}/agents")
    dpo = [r for r in read_metrics(f"{args.out}/metrics.jsonl") if "dpo/loss" in r]
    if dpo:
        print(
            f"DPO loss {dpo[0]['dpo/loss']:.3f} -> {dpo[-1]['dpo/loss']:.3f}, "
            f"preference accuracy {dpo[-1]['dpo/accuracy']:.2f}"
        )


if __name__ == "__main__":
    main()
