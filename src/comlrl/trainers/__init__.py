"""CoMLRL trainers under their compatible import path.

``from comlrl.trainers import MAGRPOTrainer, IACTrainer, MADPOTrainer`` works as with CoMLRL
1.4.3. Names resolve lazily, so importing one family does not import the others. The
``comlrl.trainers`` namespace also spans the member packages, each of which ships its own compat
module (``comlrl.trainers.reinforce``, ``.actor_critic``, ``.preference``).
"""

from importlib import import_module
from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)

_EXPORTS = {
    "comlrl.reinforce": [
        "MAGRPOConfig",
        "MAGRPOTrainer",
        "MAREINFORCEConfig",
        "MAREINFORCETrainer",
        "MAReMaxConfig",
        "MAReMaxTrainer",
        "MARLOOConfig",
        "MARLOOTrainer",
    ],
    "comlrl.ac": [
        "ActorCriticTrainerBase",
        "IACConfig",
        "IACTrainer",
        "MAACConfig",
        "MAACTrainer",
    ],
    "comlrl.pbrl": [
        "MADPOConfig",
        "MADPOTrainer",
        "MARLHFConfig",
        "MARLHFTrainer",
        "JointRewardModel",
        "MADPOIterConfig",
        "MADPOIterTrainer",
        "MARLHFIterConfig",
        "MARLHFIterTrainer",
    ],
}
_OWNER = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(_OWNER)


def __getattr__(name: str):
    module = _OWNER.get(name)
    if module is None:
        raise AttributeError(f"module 'comlrl.trainers' has no attribute {name!r}")
    return getattr(import_module(module), name)


def __dir__():
    return sorted(set(globals()) | set(__all__))
