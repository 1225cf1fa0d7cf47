"""Bare-torch lower bound: the same decoding calls and forward/backward shapes, no trainer.

For MAGRPO one "epoch" is: per turn level, one decoding call per agent over every prompt of the
level times K (the shapes our trainer uses); the reward and transition on the decoded texts;
then per agent and turn the padded forward/backward passes with a selective log-softmax (rows
grouped as our trainer groups them) and one optimizer step. IAC/MAAC and MADPO follow the same
pattern (see their classes). Nothing else: no buffers, trees, logging or validation.

Decoding uses comlrl's ``sample_rows``, the loss comlrl's ``shared_prompt_logprobs`` and the
optimizer comlrl's ``build_adamw``; MADPO scores rows with comlrl's packed rows where they
are cheaper (the kernels our trainers call: finished rows leave the decoding batch, a prompt
shared by K rows is encoded once, AdamW is fused where it can be, sequences are packed), so
the bound does the same tensor work as our side; those kernels are the only comlrl code used
here. Usage: ``python -m benchmarks.bare SPEC.json``; prints one tagged JSON line (one per spec when the
file holds a list of specs).
"""

from __future__ import annotations

import json
import sys

import torch

from benchmarks.portable import tasks
from benchmarks.portable.measure import emit, environment, resolve_device
from benchmarks.portable.protocol import run_specs, timed_training
from benchmarks.portable.sources import agent_dirs, critic_dir, load_kwargs
from comlrl.core.logprobs import (
    completion_logprobs,
    length_sorted_micro_batches,
    padded_tokens,
    padding_aware_micro_batches,
    plan_forwards,
    shared_prompt_logprobs,
    shared_prompt_micro_batches,
)
from comlrl.core.rollout import generation
from comlrl.core.rollout.generation import SamplingParams
from comlrl.core.training.optim import build_adamw


def _sample(model, tok, prompts: list[str], spec: dict, device: str):
    """One batched decoding call: every prompt times K; returns prompt ids, completions, texts."""
    enc = tok(prompts, padding=True, return_tensors="pt")
    params = SamplingParams(
        max_new_tokens=spec["max_new_tokens"],
        temperature=spec["temperature"],
        top_p=spec["top_p"],
        top_k=spec["top_k"],
        extra={"min_new_tokens": spec["min_new_tokens"]} if spec.get("min_new_tokens") else {},
    )
    k = spec["num_generations"]
    with torch.inference_mode():
        rows = generation.sample_rows(
            model,
            enc["input_ids"].to(device),
            enc["attention_mask"].to(device),
            k,
            params.generate_kwargs(),
            {tok.eos_token_id},
            tok.pad_token_id,
        )
    mask = enc["attention_mask"].tolist()
    ids = enc["input_ids"].tolist()
    prompt_ids = [
        [t for t, m in zip(ids[p], mask[p]) if m] for p in range(len(prompts)) for _ in range(k)
    ]
    return prompt_ids, rows, tok.batch_decode(rows, skip_special_tokens=True)


def _policy_gradient_step(
    model, opt, prompt_ids, completions, weights, pad_id, device, budget, share_prompts=True
):
    """Micro-batched forward/backward passes, then one optimizer step. With ``share_prompts``
    (our MAGRPO) each distinct prompt is encoded once through the same log-prob kernel as our
    trainer; otherwise (our actor-critic trainers) every row is packed as
    ``[prompt | completion]``, rows grouped by length."""
    model.train()
    opt.zero_grad(set_to_none=True)
    clen = [len(c) for c in completions]
    if share_prompts:
        groups, score = (
            shared_prompt_micro_batches(prompt_ids, clen, budget),
            shared_prompt_logprobs,
        )
    else:
        groups = length_sorted_micro_batches([len(p) for p in prompt_ids], clen, budget)
        score = completion_logprobs
    for idx in groups:
        lp = score(model, [prompt_ids[i] for i in idx], [completions[i] for i in idx], pad_id)
        w = torch.tensor([weights[i] for i in idx], device=device)
        (-(w * lp.sequence_sum()).sum()).backward()
    opt.step()


def _load_agents(spec: dict) -> list:
    """Each agent's model (one directory per agent, or the shared one) on the spec's device."""
    from transformers import AutoModelForCausalLM

    return [
        AutoModelForCausalLM.from_pretrained(d, **load_kwargs(spec)).to(spec["device"])
        for d in agent_dirs(spec)
    ]


def _normalized(returns: list[float]) -> list[float]:
    t = torch.tensor(returns)
    t = t - t.mean()
    return (t / t.std(unbiased=False).clamp(min=1e-6)).tolist()


class BareMAGRPO:
    """The MAGRPO workload as straight-line torch code."""

    def __init__(self, spec: dict, epochs: int, num_items: int):
        from transformers import AutoTokenizer

        self.spec, self.epochs, self.env_step = spec, epochs, 0
        self.device = spec["device"]
        self.tok = AutoTokenizer.from_pretrained(spec["model_dir"])
        self.agents = _load_agents(spec)
        self.opts = [
            build_adamw(m.parameters(), lr=spec["learning_rate"], weight_decay=0.01)
            for m in self.agents
        ]
        self.items = tasks.dataset(num_items)

    def train(self) -> None:
        for _ in range(self.epochs):
            self._epoch()

    def _epoch(self) -> None:
        s, n, k = self.spec, self.spec["num_agents"], self.spec["num_generations"]
        prompts = [[tasks.story_prompt(it) for it in self.items] for _ in range(n)]
        roots = [it["prompt"] for it in self.items]
        levels = []  # per turn: (per-agent (prompt_ids, completions), rewards)
        for turn in range(s["num_turns"]):
            sampled = [
                _sample(self.agents[i], self.tok, prompts[i], s, self.device) for i in range(n)
            ]
            rewards = tasks.length_ratio_reward(sampled[0][2], sampled[1][2])
            self.env_step += len(rewards)
            levels.append((sampled, rewards))
            if turn + 1 < s["num_turns"]:
                nxt = [
                    tasks.feedback_transition(
                        prompt=roots[j // k],
                        agent_completions=[sampled[i][2][j] for i in range(n)],
                        num_agents=n,
                    )
                    for j in range(len(rewards))
                ]
                prompts = [[p[i] for p in nxt] for i in range(n)]
                roots = [r for r in roots for _ in range(k)]
        # Returns: a reward plus the mean return of the child node it spawned.
        returns = list(levels[-1][1])
        all_returns = [returns]
        for _, rewards in reversed(levels[:-1]):
            returns = [r + sum(returns[j * k : (j + 1) * k]) / k for j, r in enumerate(rewards)]
            all_returns.insert(0, returns)
        buffer = s["rollout_buffer_size"]
        for i in range(n):
            for (sampled, _), rets in zip(levels, all_returns):
                # a level's nodes in buffers of ``rollout_buffer_size``: one step per buffer
                for first in range(0, len(rets) // k, buffer):
                    last = min(first + buffer, len(rets) // k)
                    nodes, rows = last - first, slice(first * k, last * k)
                    weights = []
                    for g in range(first, last):
                        adv = _normalized(rets[g * k : (g + 1) * k])
                        weights += [a / (k * nodes) for a in adv]
                    prompt_ids, comps, _ = sampled[i]
                    _policy_gradient_step(
                        self.agents[i],
                        self.opts[i],
                        prompt_ids[rows],
                        comps[rows],
                        weights,
                        self.tok.pad_token_id,
                        self.device,
                        s["logprob_max_tokens"],
                    )


class _Critic(torch.nn.Module):
    """A transformer body with a linear value head read at the last token."""

    def __init__(self, model_dir: str, kwargs: dict):
        from transformers import AutoModel

        super().__init__()
        self.body = AutoModel.from_pretrained(model_dir, **kwargs)
        # in the body's dtype, as the trainers' value heads
        self.head = torch.nn.Linear(self.body.config.hidden_size, 1, dtype=self.body.dtype)

    def values(self, tok, texts: list[str], device: str) -> torch.Tensor:
        enc = tok(texts, padding=True, return_tensors="pt")
        mask = enc["attention_mask"].to(device)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        hidden = self.body(
            input_ids=enc["input_ids"].to(device),
            attention_mask=mask,
            position_ids=pos,
            use_cache=False,
        ).last_hidden_state
        return self.head(hidden[:, -1]).squeeze(-1)


def _joint_text(prompts: list[str]) -> str:
    return "\n\n".join(f"[Agent {i}] {p}" for i, p in enumerate(prompts))


class BareActorCritic:
    """IAC (one critic per agent) or MAAC (one joint critic), single turn, V critics.

    Per batch: one generate call per agent (prompts x K), the reward, one critic forward with
    gradients on the prompts (its detached output is the baseline), the actor's micro-batched
    policy-gradient step and one critic step.
    """

    def __init__(self, spec: dict, epochs: int, num_items: int):
        from transformers import AutoTokenizer

        self.spec, self.epochs, self.env_step = spec, epochs, 0
        self.device = spec["device"]
        self.joint = spec["workload"] == "maac"
        self.tok = AutoTokenizer.from_pretrained(spec["model_dir"])
        n = spec["num_agents"]
        self.agents = _load_agents(spec)
        self.critics = [
            _Critic(critic_dir(spec), load_kwargs(spec)).to(self.device)
            for _ in range(1 if self.joint else n)
        ]
        lr = spec["learning_rate"]
        self.opts = [build_adamw(m.parameters(), lr=lr) for m in self.agents]
        self.critic_opts = [build_adamw(c.parameters(), lr=lr) for c in self.critics]
        self.items = tasks.dataset(num_items)

    def train(self) -> None:
        for _ in range(self.epochs):
            self._epoch()

    def _epoch(self) -> None:
        s, n, k = self.spec, self.spec["num_agents"], self.spec["num_generations"]
        prompts = [tasks.story_prompt(it) for it in self.items]
        sampled = [_sample(self.agents[i], self.tok, prompts, s, self.device) for i in range(n)]
        rewards = torch.tensor(tasks.length_ratio_reward(sampled[0][2], sampled[1][2]))
        self.env_step += len(rewards)
        if self.joint:
            texts = [[_joint_text([p] * n) for p in prompts]]
        else:
            texts = [prompts] * n
        values = [c.values(self.tok, t, self.device) for c, t in zip(self.critics, texts)]
        for i in range(n):
            v = values[0 if self.joint else i].repeat_interleave(k)
            adv = rewards.to(v.device) - v.detach()
            adv = (adv - adv.mean()) / adv.std(unbiased=False).clamp(min=1e-6)
            weights = (adv / len(adv)).tolist()
            prompt_ids, comps, _ = sampled[i]
            _policy_gradient_step(
                self.agents[i],
                self.opts[i],
                prompt_ids,
                comps,
                weights,
                self.tok.pad_token_id,
                self.device,
                s["logprob_max_tokens"],
                share_prompts=False,
            )
        for opt, v in zip(self.critic_opts, values):
            # every agent's K samples share the prompt's value (MAAC: one joint critic)
            loss = 0.6 * ((v.repeat_interleave(k) - rewards.to(v.device)) ** 2).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()


class BareMADPO:
    """Offline multi-agent DPO: candidates once, then epochs over the preference pairs.

    Candidates: one generate call per agent (prompts x C). Pairs: per prompt, every ordered pair
    with a positive reward gap, largest gaps first, capped. Each update: the pairs are grouped
    so every agent's distinct winner/loser rows of a group fit ``logprob_max_tokens`` padded
    tokens (one group without a cap); per group, each agent scores its distinct rows with
    gradients in padded forwards of similar lengths (the same groupers as ours) and the group's
    share of the joint loss is backpropagated (each agent's gradient equals that of its own loss
    with the others' margins detached); then a step per agent.
    """

    def __init__(self, spec: dict, epochs: int, num_items: int):
        from transformers import AutoTokenizer

        self.spec, self.epochs, self.env_step = spec, epochs, 0
        self.device = spec["device"]
        self.tok = AutoTokenizer.from_pretrained(spec["model_dir"])
        self.agents = _load_agents(spec)
        self.opts = [build_adamw(m.parameters(), lr=spec["learning_rate"]) for m in self.agents]
        self.items = tasks.dataset(num_items)

    def train(self) -> None:
        import random

        s, n, c = self.spec, self.spec["num_agents"], self.spec["num_candidates"]
        prompts = [tasks.story_prompt(it) for it in self.items]
        spec = dict(s, num_generations=c)
        sampled = [_sample(self.agents[i], self.tok, prompts, spec, self.device) for i in range(n)]
        rewards = tasks.length_ratio_reward(sampled[0][2], sampled[1][2])
        pairs = []
        for g in range(len(prompts)):
            base = g * c
            cands = [
                (rewards[base + a] - rewards[base + b], base + a, base + b)
                for a in range(c)
                for b in range(c)
                if rewards[base + a] > rewards[base + b]
            ]
            cands.sort(key=lambda x: -x[0])
            pairs += [(w, lo) for _, w, lo in cands[: s["pairs_per_prompt"]]]
        rng = random.Random(s["seed"])
        size = s["rollout_buffer_size"]
        for _ in range(self.epochs):
            rng.shuffle(pairs)
            for start in range(0, len(pairs), size):
                self._update(sampled, pairs[start : start + size])
                self.env_step += 2 * len(pairs[start : start + size])

    def _update(self, sampled, batch) -> None:
        budget, beta, n = self.spec["logprob_max_tokens"], 0.1, len(batch)
        pad = self.tok.pad_token_id
        for model in self.agents:
            model.train()
        for opt in self.opts:
            opt.zero_grad(set_to_none=True)
        for group in self._groups(sampled, batch, budget):
            margins = 0
            for i, model in enumerate(self.agents):
                prompts, comps = sampled[i][0], sampled[i][1]
                index: dict = {}  # each distinct (prompt, completion) row scored once
                for r in [r for j in group for r in batch[j]]:
                    index.setdefault((tuple(prompts[r]), tuple(comps[r])), len(index))
                keys = list(index)
                p_lens, c_lens = [len(p) for p, _ in keys], [len(c) for _, c in keys]
                # packed rows where they are cheaper, as ours
                order, kernel = plan_forwards(model, p_lens, c_lens, budget, pad)
                parts = [
                    kernel(
                        model, [keys[k][0] for k in idx], [keys[k][1] for k in idx], pad
                    ).sequence_sum()
                    for idx in order
                ]
                flat = [k for idx in order for k in idx]
                lp = torch.cat(parts)
                lp = lp[torch.tensor(flat, device=lp.device).argsort()]

                def at(r, prompts=prompts, comps=comps, lp=lp, index=index):
                    return lp[index[(tuple(prompts[r]), tuple(comps[r]))]]

                margins = margins + torch.stack([at(batch[j][0]) - at(batch[j][1]) for j in group])
            # the loss is a mean over pairs: each group backpropagates its share
            (-torch.nn.functional.logsigmoid(beta * margins).sum() / n).backward()
        for opt in self.opts:
            opt.step()

    def _groups(self, sampled, batch, budget) -> list[list[int]]:
        """Pairs grouped so every agent's distinct rows of a group fit ``budget`` padded tokens
        in all, as its forwards split them (pairs visited by their longest completion); None:
        one group."""
        if budget is None:
            return [list(range(len(batch)))]
        agents = range(len(self.agents))

        def longest(j):
            lens = [max(len(sampled[i][1][r]) for r in batch[j]) for i in agents]
            return max(lens), sum(lens)

        groups, group, rows = [], [], [set() for _ in agents]
        for j in sorted(range(len(batch)), key=longest):
            grown = [
                rows[i] | {(tuple(sampled[i][0][r]), tuple(sampled[i][1][r])) for r in batch[j]}
                for i in agents
            ]
            fits = all(_padded(list(g), budget) <= budget for g in grown)
            if group and not fits:
                groups.append(group)
                group = []
                grown = [
                    {(tuple(sampled[i][0][r]), tuple(sampled[i][1][r])) for r in batch[j]}
                    for i in agents
                ]
            group.append(j)
            rows = grown
        groups.append(group)
        return groups


def _padded(rows: list[tuple], budget) -> int:
    """Padded tokens of distinct ``(prompt, completion)`` rows split into forwards."""
    p = [len(r[0]) for r in rows]
    c = [len(r[1]) for r in rows]
    return padded_tokens(padding_aware_micro_batches(p, c, budget), p, c)


BARE = {
    "magrpo": BareMAGRPO,
    "magrpo_untrained": BareMAGRPO,
    "iac": BareActorCritic,
    "maac": BareActorCritic,
    "madpo": BareMADPO,
}


def main() -> None:
    def run_one(spec: dict) -> dict:
        spec["device"] = resolve_device(spec["device"])
        if spec.get("threads"):
            torch.set_num_threads(spec["threads"])
        cls = BARE[spec["workload"]]
        result = timed_training(
            lambda e, n: cls(spec, e, n), lambda t, m: m.attach_rows(generation), spec
        )
        result["side"] = "bare"
        result["environment"] = environment()
        return result

    with open(sys.argv[1]) as fh:
        run_specs(json.load(fh), run_one, emit)


if __name__ == "__main__":
    main()
