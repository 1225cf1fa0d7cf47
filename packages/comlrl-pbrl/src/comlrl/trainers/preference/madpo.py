"""Compatible import path ``comlrl.trainers.preference.madpo``."""

from comlrl.pbrl import AgentPreferenceTensors, MADPOConfig, MADPOTrainer, PreferencePair

__all__ = ["AgentPreferenceTensors", "MADPOConfig", "MADPOTrainer", "PreferencePair"]
