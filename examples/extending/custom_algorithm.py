"""Add an algorithm: a config and a trainer that implements ``collect`` and ``update``.

The core runs the training walk (epochs, item batches, the rollout buffer, evaluation, logging
cadence, checkpoints, signals); a family supplies only its math. This one is best-of-K
imitation (rejection-sampling fine-tuning): every agent samples K answers per prompt, the joint
answer with the highest shared reward is kept, and each agent maximizes the mean token
log-probability of its part of it. To make it available to ``comlrl train --algo best_of_k``,
register the trainer in a package's ``pyproject.toml``::

    [project.entry-points."comlrl.algorithms"]
    best_of_k = "my_package.best_of_k:BestOfKTrainer"

Run:  uv run --frozen python examples/extending/custom_algorithm.py
"""

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from comlrl.core.config.base import CommonConfig
from comlrl.core.config.fields import Integer
from comlrl.core.config.knobs import NUM_GENERATIONS
from comlrl.core.inputs import TrainerInputs, inputs_from
from comlrl.core.loop.buffer import Batch, BufferEntry
from comlrl.core.rollout import rollouts
from comlrl.core.trainer import TrainerBase
from comlrl.core.training.optim import build_adamw
from comlrl.core.training.policy_update import PolicyRows, policy_step

sys.path.insert(0, str(Path(__file__).parent))


@dataclass
class BestOfKConfig(CommonConfig):
    """The shared settings plus K, the samples per agent and prompt."""

    num_generations: int = NUM_GENERATIONS(4, check=Integer(2))
    # The registered policy loss core's policy step applies (no ratio: one pass per buffer).
    policy_loss: str = "reinforce"


@dataclass
class Pick:
    """One agent's part of the best joint answer at a node (buffered until an update)."""

    prompt_ids: list
    completion_ids: list
    reward: float

    def to_state(self) -> dict:
        return dict(self.__dict__)

    @classmethod
    def from_state(cls, state: dict) -> "Pick":
        return cls(**state)


class BestOfKTrainer(TrainerBase):
    """Best-of-K imitation for cooperating agents."""

    algorithm_name = "BestOfK"
    default_config_cls = BestOfKConfig

    def __init__(
        self,
        agent_model=None,
        num_agents: int = 2,
        tokenizer=None,
        train_dataset=None,
        eval_dataset=None,
        reward_func=None,
        formatters=None,
        args: BestOfKConfig | None = None,
    ) -> None:
        self.setup(inputs_from(TrainerInputs, locals()))

    def setup(self, inputs: TrainerInputs) -> None:
        super().setup(inputs)
        a = self.args
        self.optimizers = [
            build_adamw(m.parameters(), lr=a.agent_learning_rate) for m in self.agents
        ]
        self.use_buffer(a.rollout_buffer_size, Pick)

    def items_per_batch(self) -> int:
        return self.args.rollout_buffer_size

    def collect(self, unit) -> Batch:
        _, nodes = rollouts.unit_trees(self, unit)
        entries = []
        for node in nodes:
            best = int(np.argmax(node.rewards))
            picks = [
                [
                    Pick(
                        list(node.samples[i].prompt_ids),
                        list(node.samples[i].completion_ids[node.joint_actions[best][i]]),
                        float(node.rewards[best]),
                    )
                ]
                for i in range(self.num_agents)
            ]
            entries.append(BufferEntry(picks, node.step))
        return Batch(entries)

    def update(self, experience) -> dict:
        metrics = {"best_reward_mean": float(np.mean([p.reward for p in experience.samples[0]]))}
        for agent, picks in enumerate(experience.samples):
            self.agents[agent].train()
            # Each kept answer's mean token log-probability, averaged over the answers: the
            # ``reinforce`` loss with advantage 1 and each row weighing 1 / (rows * its length).
            rows = PolicyRows(
                prompts=[p.prompt_ids for p in picks],
                completions=[p.completion_ids for p in picks],
                advantages=[1.0] * len(picks),
                weights=[1.0 / (len(picks) * max(1, len(p.completion_ids))) for p in picks],
                turn=0,
            )
            # Core's step: scores the rows, applies the loss, checks it, runs the backward and
            # the optimizer step (sync, clipping, schedule); None when a non-finite loss was
            # skipped.
            done = policy_step(self, agent, rows)
            if done is not None:
                metrics[f"agent_{agent}/loss"], metrics[f"agent_{agent}/grad_norm"], _ = done
        return metrics


def main(argv=None):
    from _common import tiny_run

    parser = argparse.ArgumentParser(description="Best-of-K imitation on the length-ratio task.")
    parser.add_argument("--out", default="runs/custom_algorithm")
    args = parser.parse_args(argv)
    trainer = tiny_run(BestOfKTrainer, BestOfKConfig, args.out)
    trainer.train()
    return trainer


if __name__ == "__main__":
    main()
