"""MARLHF on the length-ratio task: preference pairs → a joint reward model → RL.

The joint reward model (the agents' transformer without its LM head, plus a scalar head) learns
from pairs ranked by the task reward; then --rl (magrpo by default; iac and maac need
comlrl-ac) trains the agents on the learned reward. Evaluation uses the task reward.

Run:  uv run --frozen python examples/marlhf_length_ratio.py [--model HUB_ID_OR_DIR] [--rl iac]
"""

import argparse

from comlrl.core.logging.jsonl import read_metrics
from comlrl.tasks.length_ratio import dataset, length_ratio_reward, story_prompt
from comlrl.trainers.preference import MARLHFConfig, MARLHFTrainer


def main(argv=None):
    parser = argparse.ArgumentParser(description="MARLHF on the length-ratio task.")
    parser.add_argument("--model", default=None, help="hub id or local dir (default: tiny)")
    parser.add_argument(
        "--rl", default="magrpo", help="magrpo, mareinforce, maremax, marloo, iac, maac"
    )
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--items", type=int, default=8)
    parser.add_argument("--out", default="runs/marlhf_tutorial")
    args = parser.parse_args(argv)
    model = args.model
    if model is None:
        from comlrl.core.testing import tiny_model_dir

        model = tiny_model_dir()

    config = MARLHFConfig(
        rl_algorithm=args.rl,
        num_train_epochs=args.epochs,
        num_generations=4,
        preference_num_candidates=6,
        preference_pairs_per_sample=4,
        reward_learning_rate=1e-3,  # real model: 1e-5
        reward_num_train_epochs=3,
        reward_train_batch_size=4,
        max_new_tokens=32,
        temperature=1.0,
        top_p=1.0,
        top_k=None,
        agent_learning_rate=3e-3,  # real model: 5e-6
        rollout_buffer_size=4,
        logging_steps=1,
        eval_interval=4,
        eval_num_samples=2,
        seed=0,
        output_dir=args.out,
    )
    trainer = MARLHFTrainer(
        agent_model=model,
        num_agents=2,
        train_dataset=dataset(args.items),
        eval_dataset=dataset(4),
        reward_func=length_ratio_reward,
        formatters=[story_prompt, story_prompt],
        args=config,
        critic_model=model if args.rl in ("iac", "maac") else None,
    )
    trainer.train()
    trainer.save_model(f"{args.out}/agents")
    records = read_metrics(f"{args.out}/metrics.jsonl")
    rm = [r for r in records if "reward_model/accuracy" in r]
    if rm:
        print(f"reward model accuracy on its pairs: {rm[-1]['reward_model/accuracy']:.2f}")


if __name__ == "__main__":
    main()
