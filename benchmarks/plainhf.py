"""The plain-HF yardstick: the MAGRPO workloads as a short loop of stock Hugging Face calls.

Unlike the bare bound (``benchmarks/bare.py``), which calls comlrl's own decoding and log-prob
kernels, this side uses no comlrl code at all, only the shared task, reward and model helpers
of ``benchmarks/portable``. One epoch, per turn level: one ``model.generate`` call per agent
over every prompt of the level times K (``num_return_sequences``); the reward and the
transition on the decoded texts; then, per agent and buffer of ``rollout_buffer_size`` tree
nodes, one right-padded forward/backward over ``[prompt | completion]`` rows (a log-softmax and
a gather) and one ``torch.optim.AdamW`` step.

What it measures: what a user gets from writing the loop by hand on top of ``transformers``.
Usage: ``python -m benchmarks.plainhf SPEC.json``; prints one tagged JSON line (one per spec
when the file holds a list of specs).
"""

from __future__ import annotations

import json
import sys

import torch

from benchmarks.portable import tasks
from benchmarks.portable.measure import emit, environment, resolve_device
from benchmarks.portable.protocol import run_specs, timed_training
from benchmarks.portable.sources import agent_dirs, load_kwargs


def _trim(row: list[int], eos_id: int) -> list[int]:
    """A generated row up to and including its first EOS (``generate`` pads after it)."""
    return row[: row.index(eos_id) + 1] if eos_id in row else row


def _group_advantages(returns: list[float], k: int) -> list[float]:
    """Returns minus their group's mean, over the group's standard deviation (groups of K)."""
    t = torch.tensor(returns).view(-1, k)
    t = (t - t.mean(dim=1, keepdim=True)) / t.std(dim=1, unbiased=False, keepdim=True).clamp(
        min=1e-6
    )
    return t.flatten().tolist()


class PlainHFMAGRPO:
    """MAGRPO with ``model.generate``, one padded forward per buffer and ``torch.optim.AdamW``."""

    def __init__(self, spec: dict, epochs: int, num_items: int):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.spec, self.epochs, self.env_step = spec, epochs, 0
        self.device = spec["device"]
        self.tok = AutoTokenizer.from_pretrained(spec["model_dir"])
        self.tok.padding_side = "left"
        self.agents = [
            AutoModelForCausalLM.from_pretrained(d, **load_kwargs(spec)).to(self.device)
            for d in agent_dirs(spec)
        ]
        self.opts = [
            torch.optim.AdamW(m.parameters(), lr=spec["learning_rate"], weight_decay=0.01)
            for m in self.agents
        ]
        self.items = tasks.dataset(num_items)

    def train(self) -> None:
        for _ in range(self.epochs):
            self._epoch()

    def _generate(self, model, prompts: list[str]):
        """Every prompt x K in one ``generate`` call; (prompt ids, completion ids, texts) per row."""
        s, k, eos = self.spec, self.spec["num_generations"], self.tok.eos_token_id
        enc = self.tok(prompts, padding=True, return_tensors="pt").to(self.device)
        extra = {"min_new_tokens": s["min_new_tokens"]} if s.get("min_new_tokens") else {}
        model.eval()
        with torch.no_grad():
            out = model.generate(
                **enc,
                do_sample=True,
                temperature=s["temperature"],
                top_p=s["top_p"],
                top_k=s["top_k"],
                max_new_tokens=s["max_new_tokens"],
                num_return_sequences=k,
                pad_token_id=self.tok.pad_token_id,
                eos_token_id=eos,
                **extra,
            )
        width = enc["input_ids"].shape[1]
        comps = [_trim(r, eos) for r in out[:, width:].tolist()]
        ids, mask = enc["input_ids"].tolist(), enc["attention_mask"].tolist()
        prompt_ids = [
            [t for t, m in zip(ids[p], mask[p]) if m] for p in range(len(prompts)) for _ in range(k)
        ]
        return prompt_ids, comps, self.tok.batch_decode(comps, skip_special_tokens=True)

    def _step(self, model, opt, rows: list[tuple[list[int], list[int], float]]) -> None:
        """One right-padded forward/backward over ``(prompt, completion, weight)`` rows, then
        one AdamW step."""
        model.train()
        opt.zero_grad(set_to_none=True)
        width = max(len(p) + len(c) for p, c, _ in rows)
        ids = torch.full((len(rows), width), self.tok.pad_token_id, dtype=torch.long)
        attn = torch.zeros((len(rows), width), dtype=torch.long)
        target = torch.zeros((len(rows), width), dtype=torch.bool)
        for r, (p, c, _) in enumerate(rows):
            ids[r, : len(p) + len(c)] = torch.tensor(p + c)
            attn[r, : len(p) + len(c)] = 1
            target[r, len(p) : len(p) + len(c)] = True
        ids, attn, target = ids.to(self.device), attn.to(self.device), target.to(self.device)
        logits = model(input_ids=ids, attention_mask=attn).logits[:, :-1].float()
        logp = logits.log_softmax(-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
        seq = (logp * target[:, 1:]).sum(dim=1)
        w = torch.tensor([x for _, _, x in rows], device=self.device)
        (-(w * seq).sum() / len(rows)).backward()
        opt.step()

    def _epoch(self) -> None:
        s, n, k = self.spec, self.spec["num_agents"], self.spec["num_generations"]
        prompts = [[tasks.story_prompt(it) for it in self.items] for _ in range(n)]
        roots = [it["prompt"] for it in self.items]
        levels = []  # per turn level: (per-agent (prompt ids, completions, texts), rewards)
        for turn in range(s["num_turns"]):
            sampled = [self._generate(self.agents[i], prompts[i]) for i in range(n)]
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
        # A node's return: its reward plus the mean return of the K children it spawned.
        returns = list(levels[-1][1])
        per_level = [returns]
        for _, rewards in reversed(levels[:-1]):
            returns = [r + sum(returns[j * k : (j + 1) * k]) / k for j, r in enumerate(rewards)]
            per_level.insert(0, returns)
        advantages = [_group_advantages(r, k) for r in per_level]
        buffer = s["rollout_buffer_size"]
        for i in range(n):
            # every tree node (K rows) in level order, drained a buffer of nodes at a time
            nodes = [
                [(sampled[i][0][j], sampled[i][1][j], adv[j]) for j in range(g * k, (g + 1) * k)]
                for (sampled, _), adv in zip(levels, advantages)
                for g in range(len(adv) // k)
            ]
            for start in range(0, len(nodes), buffer):
                rows = [row for node in nodes[start : start + buffer] for row in node]
                self._step(self.agents[i], self.opts[i], rows)


def main() -> None:
    def run_one(spec: dict) -> dict:
        spec["device"] = resolve_device(spec["device"])
        if spec.get("threads"):
            torch.set_num_threads(spec["threads"])
        if spec["workload"] not in PLAIN:
            raise ValueError(
                f"workload {spec['workload']!r} has no plain-HF side; valid: {sorted(PLAIN)}"
            )

        def install(trainer, meter) -> None:
            for model in trainer.agents:
                meter.attach(model, trainer.tok.eos_token_id)

        result = timed_training(lambda e, n: PLAIN[spec["workload"]](spec, e, n), install, spec)
        result["side"] = "plainhf"
        result["environment"] = environment()
        return result

    with open(sys.argv[1]) as fh:
        run_specs(json.load(fh), run_one, emit)


PLAIN = {
    "magrpo": PlainHFMAGRPO,
    "magrpo_untrained": PlainHFMAGRPO,
    "magrpo_random": PlainHFMAGRPO,
}

if __name__ == "__main__":
    main()
