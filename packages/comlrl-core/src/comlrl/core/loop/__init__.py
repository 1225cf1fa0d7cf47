"""The one training walk that drives every family.

A run is a sequence of *stages* (epochs by default), each a sequence of *units* (by default a
batch of dataset items, sharded over ranks). Per unit the loop asks the family to ``collect``
experience (rollouts, rewards, returns, advantages; no gradients), feeds it to the rollout
buffer, and calls ``update`` whenever the buffer is full. Around that it owns the eval cadence
(and a final evaluation after the last update), progress bars, SIGINT/SIGTERM stops, the
checkpoint session and the reward-hacking monitors (:mod:`comlrl.core.monitors`: fed after
every update, summarized at the end, and a clean stop after a checkpoint when a monitor in
``monitors.stop_on`` crosses its threshold).

The contract a family implements (see :class:`comlrl.core.trainer.TrainerBase` for defaults):

- ``prepare(stage) -> Sequence[unit] | None``: the stage's units; None means batches of items.
- ``collect(unit) -> Batch | None``: the unit's experience (None: nothing to learn from).
- ``update(batch) -> metrics | None``: one round of optimizer steps on a full buffer (or, for
  a family without a buffer, on the collected batch).
- ``end_stage(stage)``: optional end-of-stage work after the buffer's remainder is used.
- ``state_dict()`` / ``load_state_dict(state)``: the family's resumable state.

A stage may hold several passes over the data (an online iteration of several RL epochs, say):
an :class:`EndOfPass` unit closes one, and the loop uses the buffer's remainder before it hands
that unit to ``collect`` as any other.

The subpackage's modules: :mod:`.walk` (the walk itself), :mod:`.algorithm` (the ``Algorithm``
protocol the loop drives), :mod:`.run_state` (the run's counters and flags), :mod:`.buffer` (the
rollout buffer between ``collect`` and ``update``), :mod:`.epoch_order` (the order an epoch visits
the items), :mod:`.step_cadence` (the logging, eval and save cadences), :mod:`.evaluation`,
:mod:`.final_eval` (whether a completed run evaluates once more) and :mod:`.timing`
(seconds per phase and tokens per second).
"""

from comlrl.core.loop.walk import (
    EndOfPass,
    ItemBatch,
    StageUnits,
    TrainingLoop,
    drain,
    end_stage,
    flush,
    is_due,
    item_units,
    materialize,
    run_unit,
    seed_everything,
    span_of,
    stop_on_signals,
    units_of,
)

__all__ = [
    "EndOfPass",
    "ItemBatch",
    "StageUnits",
    "TrainingLoop",
    "drain",
    "end_stage",
    "flush",
    "is_due",
    "item_units",
    "materialize",
    "run_unit",
    "seed_everything",
    "span_of",
    "stop_on_signals",
    "units_of",
]
