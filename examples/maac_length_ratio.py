"""MAAC on the length-ratio task, written as a CoMLRL 1.4.3 user would (compat import path,
reference arguments): two agents share one centralized critic given as ``critic_model``.

The critic reads both agents' prompts as one joint observation and learns its value; each
agent's actor is trained with REINFORCE against that joint baseline. The reward is 1 when the
second answer is 2-3x as long as the first.

Run:  uv run --frozen python examples/maac_length_ratio.py [--model DIR_OR_HUB_ID] [--epochs N]
Without --model it builds the tiny offline model (no download).
"""

import argparse

from comlrl.trainers.actor_critic import MAACConfig, MAACTrainer


def length_ratio_reward(completions1, completions2):
    """1 when the second answer is 2-3x as long as the first, else a smaller value."""
    rewards = []
    for a, b in zip(completions1, completions2):
        ratio = len(b) / max(1, len(a))
        rewards.append(1.0 if 2.0 <= ratio <= 3.0 else 1.0 / (1.0 + abs(ratio - 2.5)))
    return rewards


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="hub id or local dir (default: tiny)")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--items", type=int, default=8)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--out", default="runs/maac_length_ratio")
    args = parser.parse_args(argv)
    model_dir = args.model
    if model_dir is None:
        from comlrl.core.testing import tiny_model_dir

        model_dir = tiny_model_dir()

    topics = ["a cat", "the sea", "a robot", "winter", "a dragon", "the moon"]
    dataset = [
        {"prompt": f"Write a story about {topics[i % len(topics)]}."} for i in range(args.items)
    ]
    config = MAACConfig(
        num_train_epochs=args.epochs,
        num_agents=2,
        num_turns=1,
        num_generations=4,
        max_new_tokens=24,
        temperature=1.0,
        top_p=1.0,
        agent_learning_rate=args.lr,
        critic_learning_rate=args.lr,
        rollout_buffer_size=16,
        critic_type="v",
        logging_steps=1,
        eval_interval=0,
        seed=0,
        output_dir=args.out,
    )
    trainer = MAACTrainer(
        agent_model=model_dir,
        critic_model=model_dir,
        train_dataset=dataset,
        reward_func=length_ratio_reward,
        args=config,
    )
    trainer.train()
    trainer.save_model(f"{args.out}/models")
    print(f"saved actors in {args.out}/models/agent_*, the critic in {args.out}/models/critic")


if __name__ == "__main__":
    main()
