"""Reference side: drives the published CoMLRL 1.4.3 trainers inside their own venv.

Usage: ``python reference_driver.py SPEC.json``; prints one tagged JSON result line (one per
spec when the file holds a list of specs). Only the
public constructor and ``train()`` are used, with the same model directory, prompts, reward,
transition and seed as our side.
"""

from __future__ import annotations

import json
import os
import sys

# Run as a script from the reference venv: make the sibling modules importable as a package.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from portable import tasks  # noqa: E402
from portable.measure import emit, environment, resolve_device  # noqa: E402
from portable.protocol import run_specs, timed_training  # noqa: E402
from portable.sources import critic_dir, trainer_sources  # noqa: E402


def magrpo_builder(spec: dict):
    from comlrl.trainers.reinforce import MAGRPOConfig, MAGRPOTrainer

    def build(epochs: int, num_items: int):
        args = MAGRPOConfig(
            num_train_epochs=epochs,
            agent_learning_rate=spec["learning_rate"],
            logging_steps=spec["logging_steps"],
            num_agents=spec["num_agents"],
            num_generations=spec["num_generations"],
            max_new_tokens=spec["max_new_tokens"],
            temperature=spec["temperature"],
            top_p=spec["top_p"],
            top_k=spec["top_k"],
            num_turns=spec["num_turns"],
            joint_mode=spec.get("joint_mode", "aligned"),
            early_termination_threshold=tasks.NO_EARLY_STOP,
            eval_interval=0,
            rollout_buffer_size=spec["rollout_buffer_size"],
            agent_devices=spec["device"],
        )
        trainer = MAGRPOTrainer(
            **trainer_sources(spec),
            num_agents=spec["num_agents"],
            train_dataset=tasks.dataset(num_items),
            reward_func=tasks.reward_for(spec),
            formatters=tasks.story_prompt,
            external_transition=tasks.feedback_transition,
            args=args,
        )
        trainer.verbose = False
        return trainer

    return build


def _ac_fields(spec: dict) -> dict:
    return dict(
        agent_learning_rate=spec["learning_rate"],
        critic_learning_rate=spec["learning_rate"],
        rollout_buffer_size=spec["rollout_buffer_size"],
        max_new_tokens=spec["max_new_tokens"],
        temperature=spec["temperature"],
        top_p=spec["top_p"],
        top_k=spec["top_k"],
        num_agents=spec["num_agents"],
        num_turns=spec["num_turns"],
        num_generations=spec["num_generations"],
        eval_interval=0,
        logging_steps=spec["logging_steps"],
        agent_devices=spec["device"],
        critic_devices=spec["device"],
    )


def ac_builder(spec: dict):
    if spec["workload"] == "iac":
        from comlrl.trainers.actor_critic import IACConfig as Config
        from comlrl.trainers.actor_critic import IACTrainer as Trainer

        extra = dict(use_separate_critic=spec.get("use_separate_critic", True), critic_type="v")
    else:
        from comlrl.trainers.actor_critic import MAACConfig as Config
        from comlrl.trainers.actor_critic import MAACTrainer as Trainer

        extra = dict(critic_type="v")

    def build(epochs: int, num_items: int):
        args = Config(num_train_epochs=epochs, **_ac_fields(spec), **extra)
        trainer = Trainer(
            **trainer_sources(spec),
            # the value-head variant (use_separate_critic=False) takes no critic model
            **(
                {"critic_model": critic_dir(spec)} if extra.get("use_separate_critic", True) else {}
            ),
            reward_func=tasks.reward_for(spec),
            formatters=tasks.story_prompt,
            external_transition=tasks.feedback_transition,
            args=args,
            train_dataset=tasks.dataset(num_items),
        )
        trainer.verbose = False
        return trainer

    return build


def madpo_builder(spec: dict):
    from comlrl.trainers.preference import MADPOConfig, MADPOTrainer

    def build(epochs: int, num_items: int):
        args = MADPOConfig(
            num_train_epochs=epochs,
            agent_learning_rate=spec["learning_rate"],
            logging_steps=spec["logging_steps"],
            num_agents=spec["num_agents"],
            max_new_tokens=spec["max_new_tokens"],
            temperature=spec["temperature"],
            top_p=spec["top_p"],
            top_k=spec["top_k"],
            eval_interval=0,
            rollout_buffer_size=spec["rollout_buffer_size"],
            preference_num_candidates=spec["num_candidates"],
            preference_pairs_per_sample=spec["pairs_per_prompt"],
            agent_devices=spec["device"],
        )
        trainer = MADPOTrainer(
            **trainer_sources(spec),
            num_agents=spec["num_agents"],
            train_dataset=tasks.dataset(num_items),
            reward_func=tasks.reward_for(spec),
            formatters=tasks.story_prompt,
            args=args,
        )
        trainer.verbose = False
        return trainer

    return build


def _hold_eos(model, min_new_tokens: int) -> None:
    """Make every ``generate`` call of ``model`` run at least ``min_new_tokens`` new tokens."""
    original = model.generate

    def generate(*args, **kwargs):
        kwargs.setdefault("min_new_tokens", min_new_tokens)
        return original(*args, **kwargs)

    model.generate = generate


BUILDERS = {
    "magrpo": magrpo_builder,
    "magrpo_untrained": magrpo_builder,
    "magrpo_random": magrpo_builder,
    "iac": ac_builder,
    "maac": ac_builder,
    "madpo": madpo_builder,
}


def main() -> None:
    import torch
    from transformers import AutoTokenizer

    def run_one(spec: dict) -> dict:
        spec["device"] = resolve_device(spec["device"])
        if spec.get("threads"):
            torch.set_num_threads(spec["threads"])
        eos_id = AutoTokenizer.from_pretrained(spec["model_dir"]).eos_token_id
        build = BUILDERS[spec["workload"]](spec)

        def install(trainer, meter) -> None:
            for model in trainer.agents:
                if spec.get("min_new_tokens"):
                    _hold_eos(model, spec["min_new_tokens"])
                meter.attach(model, eos_id)

        result = timed_training(build, install, spec)
        result["side"] = "reference"
        result["environment"] = environment()
        return result

    with open(sys.argv[1]) as fh:
        run_specs(json.load(fh), run_one, emit)


if __name__ == "__main__":
    main()
