"""Comparator policies: the second policy whose samples compete with the current policy's.

A comparator returns, for every actor and item, ``M`` candidate completions. Candidates sampled
by a model that shares the actor's vocabulary keep their token ids; text from anywhere else (an
API, a different tokenizer, a parsed joint completion) carries no ids and is tokenized once with
the actor's tokenizer, with EOS appended, when its pair is built.

Local sampling runs under its own seed (``torch.random.fork_rng`` + a per-call seed), so the
comparator never moves the training random stream.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from comlrl.core.centralized import CentralizedCollaboration
from comlrl.core.rollout.backends.hf import HFBackend
from comlrl.core.rollout.generation import SamplingParams
from comlrl.pbrl.api import ApiClient


@dataclass
class Candidates:
    """``M`` completions of one actor for one item; ``ids`` is None for text-only candidates."""

    texts: list[str]
    ids: list[list[int]] | None = None


@contextmanager
def seeded(seed: int, devices: Sequence[Any]):
    """Run the block under ``seed`` and restore every random stream afterwards."""
    cuda = sorted({str(d) for d in devices if str(d).startswith("cuda")})
    with torch.random.fork_rng(devices=cuda):
        torch.manual_seed(seed)
        yield


def same_vocab(tok_a: Any, tok_b: Any) -> bool:
    """Whether two tokenizers map text to the same ids."""
    return tok_a is tok_b or tok_a.get_vocab() == tok_b.get_vocab()


class Comparator:
    """Base class: ``generate(items, prompts, num_samples, params)`` → ``[actor][item]``."""

    name = "comparator"

    def generate(
        self,
        items: Sequence[dict],
        actor_prompts: list[list[str]],
        num_samples: int,
        params: SamplingParams,
        seed: int,
    ) -> list[list[Candidates]]:
        """``num_samples`` candidates per actor and item; ``actor_prompts[i][j]`` is actor
        ``i``'s prompt for item ``j``; local sampling runs under ``seed``."""
        raise NotImplementedError

    def close(self) -> None:
        """Free whatever this comparator loaded for one iteration."""


class PolicyComparator(Comparator):
    """Each actor's comparator is a local model answering that actor's own prompt."""

    def __init__(
        self,
        name: str,
        models: Sequence[Any],
        tokenizers: Sequence[Any],
        keeps_ids: Sequence[bool],
        owned: bool = False,
        max_sequences_per_call: int | None = None,
    ):
        self.name = name
        self.models = list(models)
        self.tokenizers = list(tokenizers)
        self.keeps_ids = list(keeps_ids)
        self.owned = owned
        self.backend = HFBackend(self.models, self.tokenizers, max_sequences_per_call)

    def generate(self, items, actor_prompts, num_samples, params, seed):
        devices = [next(m.parameters()).device for m in self.models]
        out = []
        with seeded(seed, devices):
            for i, prompts in enumerate(actor_prompts):
                samples = self.backend.generate(i, prompts, num_samples, params)
                out.append(
                    [
                        Candidates(list(s.texts), [list(c) for c in s.completion_ids])
                        if self.keeps_ids[i]
                        else Candidates(list(s.texts))
                        for s in samples
                    ]
                )
        return out

    def close(self) -> None:
        if self.owned:
            self.models = []
            self.backend = None


# A joint writer: (joint prompts, M, params, seed, items) -> one Candidates per item.
JointWriter = Callable[[list[str], int, SamplingParams, int, list[dict]], list[Candidates]]


class CentralizedComparator(Comparator):
    """One writer produces every role's output in a joint completion.

    ``joint_prompt(item)`` builds the writer's prompt. With ``splitter`` the joint completions
    are split into one text per actor (parse failures are counted by the splitter and give empty
    outputs); without it the joint completion is the single (joint) actor's candidate.
    """

    def __init__(
        self,
        name: str,
        writer: JointWriter,
        joint_prompt: Callable[[dict], str],
        num_actors: int,
        splitter: CentralizedCollaboration | None,
    ):
        self.name = name
        self.writer = writer
        self.joint_prompt = joint_prompt
        self.num_actors = num_actors
        self.splitter = splitter

    def generate(self, items, actor_prompts, num_samples, params, seed):
        prompts = [self.joint_prompt(item) for item in items]
        joint = self.writer(prompts, num_samples, params, seed, list(items))
        if self.splitter is None:
            return [joint]
        out: list[list[Candidates]] = [[] for _ in range(self.num_actors)]
        for item, cands in zip(items, joint):
            per_actor: list[list[str]] = [[] for _ in range(self.num_actors)]
            for text in cands.texts:
                for i, role_text in enumerate(self.splitter.split(text, item)):
                    per_actor[i].append(role_text)
            for i in range(self.num_actors):
                out[i].append(Candidates(per_actor[i]))
        return out

    def close(self) -> None:
        self.writer = None


def local_writer(model, tokenizer, budget: int | None, keeps_ids: bool) -> JointWriter:
    """A joint writer backed by a local model (token ids kept when vocabularies match)."""
    backend = HFBackend([model], [tokenizer], budget)

    def write(prompts, num_samples, params, seed, items):
        with seeded(seed, [next(model.parameters()).device]):
            samples = backend.generate(0, prompts, num_samples, params)
        return [
            Candidates(list(s.texts), [list(c) for c in s.completion_ids] if keeps_ids else None)
            for s in samples
        ]

    return write


def api_writer(client: ApiClient, agent_index: int) -> JointWriter:
    """A joint writer backed by an HTTP endpoint (one request batch per item)."""

    def write(prompts, num_samples, params, seed, items):
        return [
            Candidates(ask(client, prompt, num_samples, params, agent_index, item))
            for prompt, item in zip(prompts, items)
        ]

    return write


def ask(client: ApiClient, prompt: str, n: int, params: SamplingParams, agent: int, item) -> list:
    """``n`` completions of ``prompt`` from ``client`` with the run's sampling settings."""
    return client.complete(
        prompt,
        n,
        max_new_tokens=params.max_new_tokens,
        temperature=params.temperature,
        top_p=params.top_p,
        top_k=params.top_k,
        agent_idx=agent,
        batch_item=item,
    )


class ApiComparator(Comparator):
    """Candidates from an HTTP endpoint, one request (batch) per actor and item."""

    name = "api"

    def __init__(self, client: ApiClient):
        self.client = client

    def generate(self, items, actor_prompts, num_samples, params, seed):
        return [
            [
                Candidates(ask(self.client, prompt, num_samples, params, i, item))
                for prompt, item in zip(prompts, items)
            ]
            for i, prompts in enumerate(actor_prompts)
        ]
