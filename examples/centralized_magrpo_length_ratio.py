"""Centralized MAGRPO: one model writes both roles of the length-ratio task.

The actor sees one joint prompt holding both roles' prompts; the prompt ends by opening the
first role's ``<agent_0>`` section, and the actor continues it and opens ``<agent_1>`` for the
second role (the lenient parse; closing tags are optional). The task reward scores the split
outputs, scaled by the share of roles produced, so a missing role earns nothing. The tiny model
first learns the layout in a short supervised warm-up on its own answers. The share of joint
completions missing a role is logged per step (``centralized/parse_failure_rate``). It is the
single-model baseline for decentralized MAGRPO.

Run:  uv run --frozen python examples/centralized_magrpo_length_ratio.py [--model HUB_ID_OR_DIR]
"""

import argparse

from comlrl.core.logging.jsonl import read_metrics
from comlrl.tasks.length_ratio import dataset, length_ratio_reward, story_prompt
from comlrl.trainers.reinforce import CentralizedMAGRPOConfig, CentralizedMAGRPOTrainer


def main(argv=None):
    parser = argparse.ArgumentParser(description="Centralized MAGRPO on the length-ratio task.")
    parser.add_argument("--model", default=None, help="hub id or local dir (default: tiny)")
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--warmup-steps", type=int, default=250, help="layout warm-up steps")
    parser.add_argument("--items", type=int, default=16)
    parser.add_argument("--out", default="runs/centralized_magrpo_tutorial")
    args = parser.parse_args(argv)
    model = args.model
    if model is None:
        from comlrl.core.testing import tiny_model_dir

        model = tiny_model_dir()

    config = CentralizedMAGRPOConfig(
        num_agents=2,  # roles written by the one actor
        centralized_parse="lenient",  # "strict": closed <agent_i>...</agent_i> blocks only
        layout_warmup_steps=args.warmup_steps,  # teach the layout on the model's own answers
        layout_warmup_learning_rate=3e-3,
        num_train_epochs=args.epochs,
        num_generations=4,  # joint responses per prompt
        max_new_tokens=48,  # budget of the whole joint response
        temperature=1.0,
        top_p=1.0,
        top_k=None,
        agent_learning_rate=1e-3,  # real model: 5e-6
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
    )
    trainer.train()
    trainer.save_model(f"{args.out}/agents")
    rates = [
        r["centralized/parse_failure_rate"]
        for r in read_metrics(f"{args.out}/metrics.jsonl")
        if "centralized/parse_failure_rate" in r
    ]
    print(
        f"parse-failure rate (joint completions missing a role): first step {rates[0]:.2f}, "
        f"last step {rates[-1]:.2f}"
    )


if __name__ == "__main__":
    main()
