"""Tutorial: two agents learn the length-ratio task with MAGRPO.

Both agents get the same story prompt and answer independently (the second never sees the
first's answer). The shared reward is 1 when the second answer is 2-3x as long, in characters,
as the first, and decays with the distance otherwise. It does not judge story quality.

Run:  uv run --frozen python examples/length_ratio.py [--model HUB_ID_OR_DIR] [--epochs N]
Without --model it uses the tiny offline model, so it runs on a laptop CPU in about a minute.
With a real model (e.g. --model Qwen/Qwen2.5-0.5B) use a GPU and lower --lr (e.g. 5e-6).
"""

import argparse
import statistics

from comlrl.core.logging.jsonl import read_metrics
from comlrl.reinforce import MAGRPOConfig, MAGRPOTrainer
from comlrl.tasks.length_ratio import dataset, length_ratio_reward, story_prompt


def main(argv=None):
    parser = argparse.ArgumentParser(description="Two agents learn the length-ratio task.")
    parser.add_argument("--model", default=None, help="hub id or local dir (default: tiny)")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--out", default="runs/length_ratio_tutorial")
    args = parser.parse_args(argv)
    model = args.model
    if model is None:
        from comlrl.core.testing import tiny_model_dir

        model = tiny_model_dir()

    config = MAGRPOConfig(
        num_train_epochs=args.epochs,
        num_generations=4,  # K samples per agent and prompt: the group baseline
        max_new_tokens=32,
        num_turns=1,
        temperature=1.0,
        top_p=1.0,
        top_k=None,
        agent_learning_rate=args.lr,
        rollout_buffer_size=4,  # tree nodes per update
        logging_steps=1,
        eval_interval=8,
        eval_num_samples=4,
        seed=0,
        output_dir=args.out,
    )
    trainer = MAGRPOTrainer(
        agent_model=model,
        num_agents=2,
        train_dataset=dataset(16),
        eval_dataset=dataset(4),
        reward_func=length_ratio_reward,
        formatters=[story_prompt, story_prompt],
        args=config,
    )
    trainer.train()
    trainer.save_model(f"{args.out}/agents")

    rewards = [
        r["turn_1/reward_mean"]
        for r in read_metrics(f"{args.out}/metrics.jsonl")
        if "turn_1/reward_mean" in r
    ]
    quarter = max(1, len(rewards) // 4)
    print(f"mean reward, first quarter: {statistics.mean(rewards[:quarter]):.3f}")
    print(f"mean reward, last quarter:  {statistics.mean(rewards[-quarter:]):.3f}")


if __name__ == "__main__":
    main()
