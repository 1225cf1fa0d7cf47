"""F6: a multi-turn collect holds every turn's nodes (1 + K + ... per item), and the buffer
counts nodes. A collect is sized in nodes to fill one buffer, and all of it is trained in the
next update, so no update trains samples of an older policy (the default loss has no ratio)."""

from __future__ import annotations

import contextlib
import types

import pytest

from comlrl.core.loop import run_unit
from comlrl.core.loop.buffer import Batch, BufferEntry, RolloutBuffer
from comlrl.core.rollout.tree import nodes_per_tree
from comlrl.core.testing import tiny_pair
from comlrl.reinforce import MAGRPOConfig, MAGRPOTrainer
from tests.ac.helpers import transition
from tests.reinforce.helpers import PROMPTS, length_reward, make_config


def _items(**cfg) -> int:
    args = MAGRPOConfig(**cfg)
    return MAGRPOTrainer.items_per_batch(types.SimpleNamespace(args=args, num_agents=2))


def test_a_collect_is_sized_in_tree_nodes():
    assert nodes_per_tree(2, 4, "aligned", 2) == 5
    assert nodes_per_tree(3, 2, "cross", 2) == 1 + 4 + 16
    assert _items(num_turns=1, rollout_buffer_size=8) == 8
    assert _items(num_turns=2, num_generations=4, rollout_buffer_size=10) == 2
    assert _items(num_turns=2, num_generations=4, rollout_buffer_size=8) == 2
    assert _items(num_turns=2, num_generations=2, joint_mode="cross", rollout_buffer_size=4) == 1
    assert _items(num_turns=2, rollout_buffer_size=8, rollout_batch_size=3) == 3


class _Stub:
    """run_unit's view of a trainer whose samples record the policy version that drew them."""

    def __init__(self, capacity: int, records: int, whole: bool):
        self.rollout_buffer = RolloutBuffer(1, capacity)
        self.records, self.whole = records, whole
        self.version, self.behind, self.sizes = 0, [], []
        self.reporting = types.SimpleNamespace(log_training=lambda *a: False)
        self.monitors = types.SimpleNamespace(after_update=lambda samples, metrics, step: metrics)
        self.turn_metrics_over = None
        self.timing = types.SimpleNamespace(phase=lambda name: contextlib.nullcontext())

    def collect(self, unit):
        rows = [BufferEntry([[self.version]], j) for j in range(self.records)]
        return Batch(rows, whole=self.whole)

    def update(self, experience):
        self.behind.append(max(self.version - v for v in experience.samples[0]))
        self.sizes.append(len(experience.samples[0]))
        self.version += 1


@pytest.mark.parametrize(
    "whole, sizes, behind", [(False, [8, 8], [0, 1]), (True, [10, 10], [0, 0])]
)
def test_a_whole_batch_is_trained_in_one_update(whole, sizes, behind):
    stub = _Stub(capacity=8, records=10, whole=whole)
    run_unit(stub, None)
    run_unit(stub, None)
    assert stub.sizes[:2] == sizes and stub.behind[:2] == behind


def test_a_two_turn_run_updates_once_per_collect(tmp_path):
    m0, tok = tiny_pair(seed=0)
    m1, _ = tiny_pair(seed=1)
    trainer = MAGRPOTrainer(
        agents=[m0, m1],
        tokenizer=tok,
        train_dataset=PROMPTS[:2],
        reward_func=length_reward,
        external_transition=transition,
        args=make_config(
            num_turns=2, rollout_buffer_size=2, max_new_tokens=4, output_dir=str(tmp_path)
        ),
    )
    trainer.verbose = False
    collects, updates = [], []
    collect, update = trainer.collect, trainer.update
    trainer.collect = lambda unit: collects.append(1) or collect(unit)
    trainer.update = lambda exp: updates.append(len(exp.samples[0])) or update(exp)
    trainer.train()
    assert len(updates) == len(collects) == 2
    assert updates == [3, 3]  # one item's tree: 1 + K nodes, all in its collect's update
