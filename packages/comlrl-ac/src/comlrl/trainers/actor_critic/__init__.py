"""Compat import path of CoMLRL 1.4.3: ``from comlrl.trainers.actor_critic import IACTrainer``.

A thin re-export of :mod:`comlrl.ac`, with the submodules ``.ac_base``, ``.iac`` and ``.maac``
as in 1.4.3; it ships with comlrl-ac, so the paths work
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
