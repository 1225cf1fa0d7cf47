"""Compat import path of CoMLRL 1.4.3: ``from comlrl.trainers.actor_critic import IACTrainer``.

A thin re-export of :mod:`comlrl.ac`; this module ships with comlrl-ac, so the path works
whether or not the ``comlrl`` meta-package is installed.
"""

from comlrl.ac import (
    ActorCriticTrainerBase,
    IACConfig,
    IACTrainer,
    MAACConfig,
    MAACTrainer,
    RolloutSample,
)

__all__ = [
    "ActorCriticTrainerBase",
    "IACConfig",
    "IACTrainer",
    "MAACConfig",
    "MAACTrainer",
    "RolloutSample",
]
