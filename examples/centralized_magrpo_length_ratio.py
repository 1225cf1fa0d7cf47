"""Centralized MAGRPO: one model writes both roles of the length-ratio task.

The actor sees one joint prompt holding both roles' prompts and must answer in
<agent_0>...</agent_0><agent_1>...</agent_1> sections; the task reward scores the split outputs.
A completion without the sections scores as empty outputs and is counted
(``centralized/parse_failures``). It is the single-model baseline for decentralized MAGRPO.

Run:  uv run --frozen python examples/centralized_magrpo_length_ratio.py [--model HUB_ID_OR_DIR]
"""

import argparse

from comlrl.core.logging.jsonl import read_metrics
from comlrl.tasks.length_ratio import dataset, length_ratio_reward, story_prompt
from comlrl.trainers.preference import TaggedCentralizedComparatorAdapter
from comlrl.trainers.reinforce import CentralizedMAGRPOConfig, CentralizedMAGRPOTrainer


def main(argv=None):
    parser = argparse.ArgumentParser(description="Centralized MAGRPO on the length-ratio task.")
    parser.add_argument("--model", default=None, help="hub id or local dir (default: tiny)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--items", type=int, default=8)
    parser.add_argument("--out", default="runs/centralized_magrpo_tutorial")
    args = parser.parse_args(argv)
    model = args.model
    if model is None:
        from comlrl.core.testing import tiny_model_dir

        model = tiny_model_dir()

    config = CentralizedMAGRPOConfig(
        num_agents=2,  # roles written by the one actor
        num_train_epochs=args.epochs,
        num_generations=4,  # joint responses per prompt
        max_new_tokens=48,  # budget of the whole joint response
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
    trainer = CentralizedMAGRPOTrainer(
        agent_model=model,
        num_agents=2,
        train_dataset=dataset(args.items),
        eval_dataset=dataset(4),
        reward_func=length_ratio_reward,
        formatters=[story_prompt, story_prompt],
        args=config,
        centralized_adapter=TaggedCentralizedComparatorAdapter(),
    )
    trainer.train()
    trainer.save_model(f"{args.out}/agents")
    last = read_metrics(f"{args.out}/metrics.jsonl")[-1]
    print(f"joint completions without role tags so far: {last['centralized/parse_failures']:.0f}")


if __name__ == "__main__":
    main()
