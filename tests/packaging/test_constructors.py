"""The public trainers' constructors are written out: 1.4.3's arguments in 1.4.3's order, each
with a type an editor shows, and a misspelled keyword is a TypeError."""

from __future__ import annotations

import inspect

import pytest

from comlrl.ac import IACTrainer, MAACTrainer
from comlrl.pbrl import MADPOTrainer, MARLHFTrainer
from comlrl.reinforce import CentralizedMAGRPOTrainer, MAGRPOTrainer, MAReMaxTrainer

MAGRPO_ORDER = [
    "agent_model",
    "agents",
    "num_agents",
    "tokenizer",
    "model_config",
    "train_dataset",
    "eval_dataset",
    "dataset_type",
    "reward_func",
    "reward_processor",
    "formatters",
    "external_transition",
    "wandb_config",
    "eval_logger",
    "eval_aggregator",
    "args",
]
AC_ORDER = [
    "agent_model",
    "critic_model",
    "tokenizer",
    "reward_func",
    "reward_processor",
    "formatters",
    "args",
    "train_dataset",
    "eval_dataset",
    "model_config",
    "wandb_config",
    "metrics_callback",
    "external_transition",
    "agents",
    "critics",
]


def _positional(cls) -> list[inspect.Parameter]:
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    return [p for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]


@pytest.mark.parametrize(
    "cls, order",
    [
        (MAGRPOTrainer, MAGRPO_ORDER),
        (MAReMaxTrainer, MAGRPO_ORDER),
        (CentralizedMAGRPOTrainer, MAGRPO_ORDER),
        (MADPOTrainer, MAGRPO_ORDER),
        (MARLHFTrainer, MAGRPO_ORDER + ["metrics_callback", "critic_model", "critics"]),
        (IACTrainer, AC_ORDER),
        (MAACTrainer, AC_ORDER),
    ],
)
def test_the_constructor_takes_1_4_3s_arguments_in_order_with_types(cls, order):
    params = _positional(cls)
    assert [p.name for p in params][: len(order)] == order
    untyped = [p.name for p in params if p.annotation is inspect.Parameter.empty]
    assert not untyped, f"{cls.__name__}.__init__ leaves {untyped} untyped"
    assert "**" not in str(inspect.signature(cls.__init__))


def test_a_misspelled_argument_is_a_type_error():
    with pytest.raises(TypeError, match="rewards_func"):
        MAGRPOTrainer(rewards_func=lambda *a: [0.0])
