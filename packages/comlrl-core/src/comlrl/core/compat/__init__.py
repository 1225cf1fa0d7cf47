"""What CoMLRL 1.4.3 offered that the trainers here do not use themselves, kept so that code
written against 1.4.3 runs unchanged: :mod:`.devices` (``DeviceScheduler``), :mod:`.helpers` (small
public helpers), :mod:`.reference` (the reference-KL and sequence-scoring helpers) and
:mod:`.notices` (one-time notices for settings whose effect differs from 1.4.3).

The compatible import paths themselves (``comlrl.utils``, ``comlrl.schedulers``, ...) re-export
from here and from the rest of core.
"""
