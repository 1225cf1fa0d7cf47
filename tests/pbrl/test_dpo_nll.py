"""The optional NLL-on-winners term of the DPO loss (`dpo_nll_coef`)."""

import pytest
import torch
import torch.nn.functional as F

from comlrl.pbrl import MADPOConfig

from .test_dpo import _manual_logp, _pair, _trainer


def test_nll_term_adds_the_winners_per_token_nll(tmp_path):
    trainer, tok = _trainer(tmp_path, dpo_nll_coef=0.5)
    pair = _pair(tok)
    with torch.no_grad():
        out = trainer.compute_dpo_loss([pair], backward=False)
        w = [
            _manual_logp(m, pair.prompt_ids[i], pair.winner_ids[i])
            for i, m in enumerate(trainer.agents)
        ]
        lo = [
            _manual_logp(m, pair.prompt_ids[i], pair.loser_ids[i])
            for i, m in enumerate(trainer.agents)
        ]
    margin = sum(a - b for a, b in zip(w, lo))
    tokens = sum(len(ids) for ids in pair.winner_ids)  # 4 + 3, EOS included
    expected = -F.logsigmoid(0.5 * margin) + 0.5 * (-sum(w) / tokens)
    assert float(out.loss) == pytest.approx(float(expected), abs=1e-5)


def test_nll_term_is_off_by_default_and_checked(tmp_path):
    trainer, tok = _trainer(tmp_path)
    pair = _pair(tok)
    with torch.no_grad():
        out = trainer.compute_dpo_loss([pair], backward=False)
    assert float(out.loss) == pytest.approx(float(-F.logsigmoid(0.5 * out.margins[0])), abs=1e-6)
    with pytest.raises(ValueError, match="dpo_nll_coef"):
        MADPOConfig(dpo_nll_coef=-1.0)
