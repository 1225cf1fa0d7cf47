"""Seeded short runs of MAGRPO, IAC, MAAC and MADPO end with recorded weights.

The fixture was written from the code as it stood before the single-loop refactor; a refactor of
the training walk must reproduce it within 1e-6. Each parameter is summarised by its sum and its
projection on a fixed random direction, which any change to the update moves. To re-record after
an intended behaviour change, run this file with ``COMLRL_RECORD_FIXTURE=1`` and say why in the
commit.
"""

import json
import os
from pathlib import Path

import pytest
import torch

from comlrl.ac import IACConfig, IACTrainer, MAACConfig, MAACTrainer
from comlrl.pbrl import MADPOConfig, MADPOTrainer
from comlrl.reinforce import MAGRPOTrainer

from ..ac.helpers import config as ac_config
from ..ac.helpers import fresh_pair
from ..ac.helpers import transition as ac_transition
from ..pbrl.helpers import FAST, PROMPTS, ratio_reward
from ..reinforce.helpers import length_reward, make_config

FIXTURE = Path(__file__).parent / "fixtures" / "behaviour_weights.json"
RECORD = os.environ.get("COMLRL_RECORD_FIXTURE") == "1"


def _fingerprint(models) -> list[dict[str, list[float]]]:
    out = []
    for model in models:
        entry = {}
        for name, p in model.named_parameters():
            if not p.requires_grad:
                continue
            flat = p.detach().double().flatten()
            g = torch.Generator().manual_seed(len(name) * 7919 + flat.numel())
            direction = torch.randn(flat.numel(), generator=g, dtype=torch.float64)
            entry[name] = [flat.sum().item(), (flat * direction).sum().item()]
        out.append(entry)
    return out


def _magrpo(tmp_path, **cfg):
    m0, tok = fresh_pair(0)
    m1, _ = fresh_pair(1)
    turns = cfg.get("num_turns", 1)
    return MAGRPOTrainer(
        agents=[m0, m1],
        tokenizer=tok,
        train_dataset=PROMPTS[:2],
        reward_func=length_reward,
        external_transition=ac_transition if turns > 1 else None,
        args=make_config(output_dir=str(tmp_path / "run"), **cfg),
    )


def _iac(tmp_path, separate=True):
    m0, tok = fresh_pair(0)
    m1, _ = fresh_pair(1)
    critics = [fresh_pair(2)[0], fresh_pair(3)[0]] if separate else None
    return IACTrainer(
        agents=[m0, m1],
        critics=critics,
        tokenizer=tok,
        train_dataset=PROMPTS[:2],
        reward_func=length_reward,
        args=ac_config(IACConfig, use_separate_critic=separate, output_dir=str(tmp_path / "run")),
    )


def _maac(tmp_path):
    m0, tok = fresh_pair(0)
    m1, _ = fresh_pair(1)
    return MAACTrainer(
        agents=[m0, m1],
        critic_model=fresh_pair(2)[0],
        tokenizer=tok,
        train_dataset=PROMPTS[:2],
        reward_func=length_reward,
        external_transition=ac_transition,
        args=ac_config(
            MAACConfig, num_turns=2, num_generations=1, output_dir=str(tmp_path / "run")
        ),
    )


def _madpo(tmp_path):
    m0, tok = fresh_pair(0)
    m1, _ = fresh_pair(1)
    base = {**FAST, "preference_num_candidates": 3, "preference_pairs_per_sample": 2}
    base.update(num_train_epochs=2, train_batch_size=2, output_dir=str(tmp_path / "run"))
    return MADPOTrainer(
        agents=[m0, m1],
        tokenizer=tok,
        train_dataset=PROMPTS[:2],
        reward_func=ratio_reward,
        args=MADPOConfig(**base),
    )


CASES = {
    "magrpo": lambda p: _magrpo(p),
    "magrpo_two_turns": lambda p: _magrpo(p, num_turns=2, num_train_epochs=2),
    "iac_separate": lambda p: _iac(p),
    "iac_value_head": lambda p: _iac(p, separate=False),
    "maac_two_turns": _maac,
    "madpo": _madpo,
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_seeded_run_reproduces_recorded_weights(tmp_path, case):
    trainer = CASES[case](tmp_path)
    trainer.train()
    got = _fingerprint(trainer.agents)
    recorded = json.loads(FIXTURE.read_text()) if FIXTURE.exists() else {}
    if RECORD:
        recorded[case] = got
        FIXTURE.write_text(json.dumps(recorded, indent=0, sort_keys=True))
        return
    want = recorded[case]
    assert len(got) == len(want)
    for agent, (g, w) in enumerate(zip(got, want)):
        assert g.keys() == w.keys(), f"agent {agent}: parameter names changed"
        for name in w:
            for gv, wv in zip(g[name], w[name]):
                assert abs(gv - wv) <= 1e-6 * max(1.0, abs(wv)), (case, agent, name, gv, wv)
