"""Multi-turn feedback: two agents answer, receive feedback, and answer again.

Turn 1: both agents write a story for the same prompt. An external transition then tells each
agent how long the answers were; agent 2 is asked to make its answer 2-3x as long as agent 1's.
Turn 2: both answer again with that feedback in their prompt. Returns add the turn-2 reward to
the turn-1 reward (discount 1), so the agents learn behaviour that pays off across turns.

Run:  uv run --frozen python examples/multi_turn_feedback.py [--model HUB_ID_OR_DIR]
"""

import argparse

from comlrl.core.logging.jsonl import read_metrics
from comlrl.reinforce import MAGRPOConfig, MAGRPOTrainer
from comlrl.tasks.length_ratio import dataset, length_ratio_reward


def feedback(
    *, prompt, agent_completions, num_agents, prompt_history_per_agent, response_history_per_agent
):
    """The external transition: next-turn prompts built from the previous answers."""
    first, second = agent_completions
    ratio = len(second) / max(1, len(first))
    if ratio < 2:
        advice = f"Yours was {ratio:.1f}x as long as the other answer; make it 2-3x: longer."
    elif ratio > 3:
        advice = f"Yours was {ratio:.1f}x as long as the other answer; make it 2-3x: shorter."
    else:
        advice = "Yours had the right length; keep it."
    return [
        f"{prompt} Your last answer had {len(first)} characters. Write it again.",
        f"{prompt} {advice} Write it again.",
    ]


def main(argv=None):
    parser = argparse.ArgumentParser(description="Two agents, two turns, external feedback.")
    parser.add_argument("--model", default=None, help="hub id or local dir (default: tiny)")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--out", default="runs/multi_turn_feedback")
    args = parser.parse_args(argv)
    model = args.model
    if model is None:
        from comlrl.core.testing import tiny_model_dir

        model = tiny_model_dir()

    config = MAGRPOConfig(
        num_train_epochs=args.epochs,
        num_turns=2,
        num_generations=2,  # K=2: 2 turn-1 nodes' children -> 1 + 2 nodes per item
        max_new_tokens=24,
        temperature=1.0,
        top_p=1.0,
        top_k=None,
        agent_learning_rate=2e-3,
        rollout_buffer_size=3,
        discount=1.0,
        early_termination_threshold=None,  # always take the second turn
        logging_steps=1,
        eval_interval=0,
        seed=0,
        output_dir=args.out,
    )
    trainer = MAGRPOTrainer(
        agent_model=model,
        num_agents=2,
        train_dataset=dataset(8),
        reward_func=length_ratio_reward,
        external_transition=feedback,
        args=config,
    )
    trainer.train()
    for rec in read_metrics(f"{args.out}/metrics.jsonl")[-2:]:
        turns = {k: round(v, 3) for k, v in rec.items() if k.startswith("turn_")}
        print(rec["step"], turns)


if __name__ == "__main__":
    main()
