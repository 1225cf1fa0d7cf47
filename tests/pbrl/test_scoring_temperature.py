"""MADPO scores its DPO log-probs at temperature 1 even when its candidates were sampled at
another temperature (docs/preference.md says why)."""

import comlrl.core.logprobs.kernels as kernels
from comlrl.core.rollout import rollouts
from comlrl.pbrl import MADPOConfig, MADPOTrainer

from .helpers import FAST, PROMPTS, ratio_reward, two_agents


def test_madpo_scores_at_temperature_one_while_sampling_at_0_6(tmp_path, monkeypatch):
    agents, tok = two_agents()
    args = MADPOConfig(
        **{**FAST, "temperature": 0.6},
        preference_num_candidates=3,
        train_batch_size=2,
        reference_free=False,
        output_dir=str(tmp_path / "run"),
    )
    trainer = MADPOTrainer(
        agents=agents, tokenizer=tok, train_dataset=PROMPTS[:2], reward_func=ratio_reward, args=args
    )
    assert rollouts.sampling_params(trainer).temperature == 0.6
    seen = []
    original = kernels.selective_log_softmax

    def spied(logits, targets, temperature=1.0):
        seen.append(temperature)
        return original(logits, targets, temperature)

    monkeypatch.setattr(kernels, "selective_log_softmax", spied)
    trainer.train()
    assert seen and set(seen) == {1.0}  # reference and policy terms alike
