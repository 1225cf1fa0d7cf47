"""Compatible import path ``comlrl.trainers.preference.marlhf``."""

from comlrl.pbrl import JointRewardModel, MARLHFConfig, MARLHFTrainer

__all__ = ["JointRewardModel", "MARLHFConfig", "MARLHFTrainer"]
