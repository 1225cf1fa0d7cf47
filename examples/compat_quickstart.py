"""A CoMLRL-style script: it uses only the compatible import paths and arguments, so a script
written for CoMLRL 1.4.3 runs unchanged. Two agents train on the length-ratio reward and the
result is saved with ``save_model`` and reloaded.

Run:  uv run --frozen python examples/compat_quickstart.py [--model DIR_OR_HUB_ID] [--out DIR]
Without --model it builds the tiny offline model (no download).
"""

import argparse

from transformers import AutoModelForCausalLM, AutoTokenizer

from comlrl.trainers.reinforce import MAGRPOConfig, MAGRPOTrainer


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
    parser.add_argument("--out", default="runs/compat_quickstart")
    parser.add_argument("--epochs", type=int, default=1)
    args = parser.parse_args(argv)
    model_dir = args.model
    if model_dir is None:
        from comlrl.core.testing import tiny_model_dir

        model_dir = tiny_model_dir()

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    dataset = [
        {"prompt": f"Write a story about {t}."} for t in ("a cat", "the sea", "a robot", "winter")
    ]
    config = MAGRPOConfig(
        num_train_epochs=args.epochs,
        num_generations=4,
        max_new_tokens=24,
        num_turns=1,
        temperature=1.0,
        top_p=1.0,
        agent_learning_rate=1e-3,
        logging_steps=1,
        eval_interval=0,
        output_dir=args.out,
    )
    trainer = MAGRPOTrainer(
        agent_model=model_dir,
        num_agents=2,
        tokenizer=tokenizer,
        train_dataset=dataset,
        reward_func=length_ratio_reward,
        formatters=[lambda ex: ex["prompt"]] * 2,
        args=config,
    )
    trainer.train()
    trainer.save_model(f"{args.out}/models")

    # The saved agents load like any Hugging Face model.
    for i in range(2):
        AutoModelForCausalLM.from_pretrained(f"{args.out}/models/agent_{i}")
    print(f"saved and reloaded agents in {args.out}/models")


if __name__ == "__main__":
    main()
