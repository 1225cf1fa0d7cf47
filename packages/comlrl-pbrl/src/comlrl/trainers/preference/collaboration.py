"""Compatible import path ``comlrl.trainers.preference.collaboration``."""

from comlrl.core.compat.reference import joint_sequence_log_prob
from comlrl.pbrl import CentralizedCollaboration

__all__ = ["CentralizedCollaboration", "joint_sequence_log_prob"]
