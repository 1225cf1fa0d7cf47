"""An in-process stand-in for a vLLM engine, for driving the vLLM backend's logic on CPU.

It is built like the real one (from a model folder or hub id, with LoRA slots when
``max_loras`` > 0), loads its own copy of the weights, takes the same requests
(``vllm.SamplingParams`` keyword arguments from :mod:`comlrl.core.rollout.backends.vllm.sampling`), and
answers token ids with each sampled token's log-prob under the processed (tempered, truncated)
distribution, as vLLM's ``processed_logprobs`` mode does. Adapters load from the folders the
backend saves, by LoRA id, and weights through ``load_weights`` with Hugging Face names. So a
backend bug in what it sends, when it refreshes, or which adapter a request names shows up as
a conformance failure here.
"""

from __future__ import annotations

import torch
from transformers import AutoModelForCausalLM

REQUIRED = {"n", "max_tokens", "temperature", "top_p", "top_k", "min_p", "stop_token_ids"}


class FakeEngine:
    """See the module docstring. ``log`` records the calls the backend made."""

    instances: list[FakeEngine] = []

    def __init__(self, source, *, max_loras, max_lora_rank, options, seed):
        self.source, self.max_loras, self.seed = source, max_loras, seed
        self.model = AutoModelForCausalLM.from_pretrained(source).eval()
        self.adapters: dict[int, torch.nn.Module] = {}
        self.log: list[tuple] = []
        self.asleep = False
        self._gen = torch.Generator().manual_seed(seed)
        FakeEngine.instances.append(self)

    # --------------------------------------------------------------- Engine methods
    def generate(self, requests):
        assert not self.asleep, "generate on a sleeping engine"
        self.log.append(("generate", len(requests)))
        out = []
        for r in requests:
            missing = REQUIRED - set(r.sampling)
            assert not missing, missing
            model = self._model_for(r.adapter)
            seed = r.sampling.get("seed")
            gen = torch.Generator().manual_seed(seed) if seed is not None else self._gen
            out.append(
                [self._sample(model, r.prompt_ids, r.sampling, gen) for _ in range(r.sampling["n"])]
            )
        return out

    def load_weights(self, weights):
        assert self.max_loras == 0, "full weights pushed to a LoRA engine"
        state = dict(weights)
        self.model.load_state_dict(state, strict=True)
        self.log.append(("load_weights", len(state)))

    def drop_adapter(self, slot):
        self.adapters.pop(slot.lora_id, None)
        self.log.append(("drop_adapter", slot.lora_id))

    def sleep(self):
        self.asleep = True
        self.log.append(("sleep",))

    def wake_up(self):
        self.asleep = False
        self.log.append(("wake_up",))

    # --------------------------------------------------------------- internals
    def _model_for(self, slot):
        if slot is None:
            assert self.max_loras == 0, "a LoRA engine got a request without an adapter"
            return self.model
        assert self.max_loras > 0, "an adapter request to an engine without LoRA"
        if slot.lora_id not in self.adapters:
            from peft import PeftModel

            assert len(self.adapters) < self.max_loras + 1
            base = AutoModelForCausalLM.from_pretrained(self.source)
            self.adapters[slot.lora_id] = PeftModel.from_pretrained(base, slot.path).eval()
            self.log.append(("load_adapter", slot.lora_id, slot.path))
        return self.adapters[slot.lora_id]

    @torch.no_grad()
    def _sample(self, model, prompt, sp, gen):
        ids, lps = list(prompt), []
        new: list[int] = []
        for _ in range(sp["max_tokens"]):
            logits = model(torch.tensor([ids])).logits[0, -1].float()
            if sp["temperature"] == 0:
                tok = int(logits.argmax())
                lp = float(torch.log_softmax(logits, -1)[tok])
            else:
                logits = logits / sp["temperature"]
                if sp["top_k"] > 0:
                    kth = torch.topk(logits, sp["top_k"]).values[-1]
                    logits = logits.masked_fill(logits < kth, float("-inf"))
                probs = torch.softmax(logits, -1)
                if sp["top_p"] < 1:
                    sorted_p, order = probs.sort(descending=True)
                    drop = sorted_p.cumsum(-1) - sorted_p > sp["top_p"]
                    logits[order[drop]] = float("-inf")
                if sp["min_p"] > 0:
                    logits = logits.masked_fill(probs < sp["min_p"] * probs.max(), float("-inf"))
                logp = torch.log_softmax(logits, -1)
                tok = int(torch.multinomial(logp.exp(), 1, generator=gen))
                lp = float(logp[tok])
            ids.append(tok)
            new.append(tok)
            lps.append(lp)
            if tok in sp["stop_token_ids"]:
                break
        from comlrl.core.rollout.backends.vllm.backend import EngineSample

        return EngineSample(new, lps if sp.get("logprobs") is not None else None)
