"""Compatible import path ``comlrl.trainers.preference.collaboration``."""

from comlrl.pbrl import CentralizedCollaboration

__all__ = ["CentralizedCollaboration"]
