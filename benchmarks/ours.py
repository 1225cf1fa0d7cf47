"""Our side of a benchmark: the same workload through comlrl's own trainers.

Usage: ``python -m benchmarks.ours SPEC.json``; prints one tagged JSON result line (one per
spec when the file holds a list of specs).
"""

from __future__ import annotations

import functools
import json
import sys
import tempfile

import torch

from benchmarks.portable import tasks
from benchmarks.portable.measure import emit, environment, resolve_device
from benchmarks.portable.protocol import run_specs, timed_training
from benchmarks.portable.sources import critic_dir, trainer_sources


def magrpo_builder(spec: dict, run_dir: str):
    from comlrl.reinforce import MAGRPOConfig, MAGRPOTrainer

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
            rollout_batch_size=num_items,
            logprob_max_tokens=spec["logprob_max_tokens"],
            agent_devices=spec["device"],
            seed=spec["seed"],
            output_dir=run_dir,
            decode_fast_path=spec.get("decode_fast_path", "auto"),
            **spec.get("config", {}),
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
        if spec.get("min_new_tokens"):  # train()'s extra keywords are generation settings
            trainer.train = functools.partial(trainer.train, min_new_tokens=spec["min_new_tokens"])
        return trainer

    return build


def _ac_fields(spec: dict, run_dir: str, num_items: int) -> dict:
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
        rollout_batch_size=num_items,
        logprob_max_tokens=spec["logprob_max_tokens"],
        seed=spec["seed"],
        output_dir=run_dir,
    )


def ac_builder(spec: dict, run_dir: str):
    if spec["workload"] == "iac":
        from comlrl.ac import IACConfig as Config
        from comlrl.ac import IACTrainer as Trainer

        extra = dict(use_separate_critic=spec.get("use_separate_critic", True), critic_type="v")
    else:
        from comlrl.ac import MAACConfig as Config
        from comlrl.ac import MAACTrainer as Trainer

        extra = dict(critic_type="v")

    def build(epochs: int, num_items: int):
        fields = {**_ac_fields(spec, run_dir, num_items), **extra, **spec.get("config", {})}
        args = Config(num_train_epochs=epochs, **fields)
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


def madpo_builder(spec: dict, run_dir: str):
    from comlrl.pbrl import MADPOConfig, MADPOTrainer

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
            rollout_batch_size=num_items,
            logprob_max_tokens=spec["logprob_max_tokens"],
            seed=spec["seed"],
            output_dir=run_dir,
            **spec.get("config", {}),
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


BUILDERS = {
    "magrpo": magrpo_builder,
    "magrpo_untrained": magrpo_builder,
    "magrpo_random": magrpo_builder,
    "iac": ac_builder,
    "maac": ac_builder,
    "madpo": madpo_builder,
}


def main() -> None:
    import comlrl.core.rollout.generation as generation

    def run_one(spec: dict) -> dict:
        spec["device"] = resolve_device(spec["device"])
        if spec.get("threads"):
            torch.set_num_threads(spec["threads"])
        with tempfile.TemporaryDirectory(prefix="comlrl-bench-") as run_dir:
            build = BUILDERS[spec["workload"]](spec, run_dir)
            result = timed_training(build, lambda t, m: m.attach_rows(generation), spec)
        result["side"] = "ours"
        result["environment"] = environment()
        return result

    with open(sys.argv[1]) as fh:
        run_specs(json.load(fh), run_one, emit)


if __name__ == "__main__":
    main()
