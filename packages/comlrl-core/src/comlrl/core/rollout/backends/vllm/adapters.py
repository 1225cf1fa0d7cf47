"""One vLLM LoRA request per agent, renewed after each of the agent's updates.

vLLM caches a loaded adapter under its integer id, so a trained adapter is only picked up
under an id the engine has not seen: every refresh takes a fresh id (ids are never reused),
saves the adapter to a new folder, and hands back the slot it replaces so the engine can drop
it. The bookkeeping is plain Python; :mod:`.engine` turns a slot into ``vllm.lora.request.
LoRARequest(name, id, path)``.
"""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class AdapterSlot:
    """What a LoRA request names: the agent's adapter at one version."""

    agent: int
    name: str
    lora_id: int
    version: int
    path: str


class AdapterBook:
    """The current adapter slot of every adapter agent of one engine, saved under ``root``."""

    def __init__(self, agents: Sequence[int], root: str):
        if len(set(agents)) != len(agents):
            raise ValueError(f"each agent gets one adapter slot; agents {list(agents)} repeat.")
        self.root = root
        self._ids = itertools.count(1)  # vLLM requires ids above 0
        self._slots: dict[int, AdapterSlot] = {}
        self.agents = tuple(agents)

    def current(self, agent: int) -> AdapterSlot | None:
        """The slot the next request of ``agent`` uses (None before its first save)."""
        self._known(agent)
        return self._slots.get(agent)

    def renew(self, agent: int) -> tuple[AdapterSlot, AdapterSlot | None]:
        """A new slot for ``agent`` (fresh id, next version, an empty folder to save the
        adapter in) and the slot it replaces (None the first time)."""
        self._known(agent)
        old = self._slots.get(agent)
        version = 0 if old is None else old.version + 1
        path = os.path.join(self.root, f"agent{agent}", f"v{version}")
        os.makedirs(path, exist_ok=False)
        slot = AdapterSlot(agent, f"agent{agent}-v{version}", next(self._ids), version, path)
        self._slots[agent] = slot
        return slot, old

    def discard(self, slot: AdapterSlot) -> None:
        """Delete a replaced slot's saved files (after the engine dropped it)."""
        shutil.rmtree(slot.path, ignore_errors=True)

    def _known(self, agent: int) -> None:
        if agent not in self.agents:
            raise ValueError(f"agent {agent} has no adapter slot here; slots: {self.agents}.")
