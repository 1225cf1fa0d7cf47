"""IAC on the length-ratio task, written as a CoMLRL 1.4.3 user would (compat import path,
reference arguments): two agents, each with its own separate critic model.

Both agents get the same story prompt and answer independently. The shared reward is 1 when the
second answer is 2-3x as long as the first, and decays with the distance otherwise. Each agent's
critic learns V(prompt); the actor is trained with REINFORCE against that baseline.

Run:  uv run --frozen python examples/iac_length_ratio.py [--model DIR_OR_HUB_ID] [--epochs N]
Without --model it builds the tiny offline model (no download) and runs on a CPU in a minute or
two. With a real model (e.g. Qwen/Qwen2.5-0.5B) use a GPU and lower --lr (e.g. 5e-6).
"""

import argparse

from transformers import AutoTokenizer

from comlrl.trainers.actor_critic import IACConfig, IACTrainer

TOPICS = ["a cat", "the sea", "a robot", "winter", "a dragon", "the moon", "a bakery", "a river"]


def length_ratio_reward(completions1, completions2):
    """1 when the second answer is 2-3x as long as the first, else a smaller value."""
    rewards = []
    for a, b in zip(completions1, completions2):
        ratio = len(b) / max(1, len(a))
        rewards.append(1.0 if 2.0 <= ratio <= 3.0 else 1.0 / (1.0 + abs(ratio - 2.5)))
    return rewards


def mean_length(rollouts):
    """A metrics_callback: the mean completion length of each agent."""
    out = {}
    for agent in sorted({r.agent_idx for r in rollouts}):
        lengths = [len(r.completion) for r in rollouts if r.agent_idx == agent]
        out[f"agent_{agent}/completion_chars"] = sum(lengths) / len(lengths)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="hub id or local dir (default: tiny)")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--items", type=int, default=8)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--out", default="runs/iac_length_ratio")
    args = parser.parse_args(argv)
    model_dir = args.model
    if model_dir is None:
        from comlrl.core.testing import tiny_model_dir

        model_dir = tiny_model_dir()

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    dataset = [
        {"prompt": f"Write a story about {TOPICS[i % len(TOPICS)]}."} for i in range(args.items)
    ]
    config = IACConfig(
        num_train_epochs=args.epochs,
        num_turns=1,
        num_generations=4,
        max_new_tokens=24,
        temperature=1.0,
        top_p=1.0,
        agent_learning_rate=args.lr,
        critic_learning_rate=args.lr,
        rollout_buffer_size=16,
        use_separate_critic=True,
        critic_type="v",
        logging_steps=1,
        eval_interval=0,
        seed=0,
        output_dir=args.out,
    )
    trainer = IACTrainer(
        agents=[model_dir, model_dir],
        critics=[model_dir, model_dir],
        tokenizer=tokenizer,
        train_dataset=dataset,
        reward_func=length_ratio_reward,
        formatters=[lambda ex: ex["prompt"]] * 2,
        metrics_callback=mean_length,
        args=config,
    )
    trainer.train()
    trainer.save_model(f"{args.out}/models")
    print(f"saved actors and critics in {args.out}/models")


if __name__ == "__main__":
    main()
