"""The joint DPO loss: gradients equal the hand-derived DPO gradient, EOS is scored."""

import pytest
import torch

from comlrl.pbrl import MADPOConfig, MADPOTrainer, PreferencePair

from .helpers import FAST, PROMPTS, ratio_reward, two_agents

BETA = 0.5


def _trainer(tmp_path, **cfg):
    agents, tok = two_agents()
    args = MADPOConfig(
        **{**FAST, "dpo_beta": BETA, "preference_num_candidates": 2, "output_dir": str(tmp_path)},
        **cfg,
    )
    trainer = MADPOTrainer(
        agents=agents, tokenizer=tok, train_dataset=PROMPTS[:2], reward_func=ratio_reward, args=args
    )
    return trainer, tok


def _pair(tok):
    """A fixed pair whose completions end with EOS (pad == EOS in the tiny tokenizer)."""
    eos = tok.eos_token_id
    p0 = tok("Write a story about a cat.")["input_ids"]
    p1 = tok("Write a story about the sea.")["input_ids"]
    return PreferencePair(
        prompts=["a", "b"],
        winner_completions=["w0", "w1"],
        loser_completions=["l0", "l1"],
        prompt_ids=[p0, p1],
        winner_ids=[[11, 42, 7, eos], [5, 6, eos]],
        loser_ids=[[13, eos], [9, 8, 30, 31, 2]],
        winner_reward=1.0,
        loser_reward=0.0,
        candidate_reward_mean=0.5,
    )


def _manual_logp(model, prompt, completion):
    """Sum of log p(y_t | x, y_<t) over every completion token, one unpadded forward."""
    ids = torch.tensor([prompt + completion])
    logp = torch.log_softmax(model(input_ids=ids).logits[0].float(), -1)
    p = len(prompt)
    return sum(logp[p - 1 + t, tok] for t, tok in enumerate(completion))


def _hand_gradients(trainer, pair, ref=None):
    models = trainer.agents
    with torch.no_grad():
        deltas = [
            _manual_logp(m, pair.prompt_ids[i], pair.winner_ids[i])
            - _manual_logp(m, pair.prompt_ids[i], pair.loser_ids[i])
            for i, m in enumerate(models)
        ]
        if ref is not None:
            deltas = [d - (r[0] - r[1]) for d, r in zip(deltas, ref)]
        margin = sum(deltas)
    # d/dtheta_i of -log sigmoid(beta * margin) = -beta * sigmoid(-beta * margin) * d delta_i
    coef = -BETA * torch.sigmoid(-BETA * margin)
    out = []
    for i, m in enumerate(models):
        m.zero_grad(set_to_none=True)
        delta = _manual_logp(m, pair.prompt_ids[i], pair.winner_ids[i]) - _manual_logp(
            m, pair.prompt_ids[i], pair.loser_ids[i]
        )
        (coef * delta).backward()
        out.append({n: p.grad.clone() for n, p in m.named_parameters() if p.grad is not None})
        m.zero_grad(set_to_none=True)
    return out


def _trainer_gradients(trainer, pair):
    for m in trainer.agents:
        m.zero_grad(set_to_none=True)
    out = trainer.compute_dpo_loss([pair], backward=True)
    grads = [
        {n: p.grad.clone() for n, p in m.named_parameters() if p.grad is not None}
        for m in trainer.agents
    ]
    return out, grads


def _assert_same(hand, got):
    for i, (h, g) in enumerate(zip(hand, got)):
        assert set(h) == set(g), f"agent {i}: different parameters got gradients"
        for name in h:
            assert torch.allclose(h[name], g[name], atol=1e-5, rtol=1e-4), f"agent {i} {name}"


@pytest.mark.parametrize("max_tokens", [None, 8])
def test_each_agent_gets_the_hand_derived_dpo_gradient(tmp_path, max_tokens):
    trainer, tok = _trainer(tmp_path, logprob_max_tokens=max_tokens)
    pair = _pair(tok)
    hand = _hand_gradients(trainer, pair)
    out, got = _trainer_gradients(trainer, pair)
    _assert_same(hand, got)
    assert any(g.abs().sum() > 0 for g in got[0].values())
    assert any(g.abs().sum() > 0 for g in got[1].values())
    with torch.no_grad():
        margin = sum(
            _manual_logp(m, pair.prompt_ids[i], pair.winner_ids[i])
            - _manual_logp(m, pair.prompt_ids[i], pair.loser_ids[i])
            for i, m in enumerate(trainer.agents)
        )
    assert out.loss.item() == pytest.approx(
        -torch.nn.functional.logsigmoid(BETA * margin).item(), abs=1e-5
    )


def test_reference_margins_enter_the_gradient(tmp_path):
    trainer, tok = _trainer(tmp_path, reference_free=False)
    pair = _pair(tok)
    pair.reference_logps = [[-3.0, -1.0], [-2.5, -9.0]]
    hand = _hand_gradients(trainer, pair, ref=pair.reference_logps)
    _, got = _trainer_gradients(trainer, pair)
    _assert_same(hand, got)


def test_other_agents_margins_only_scale_an_agents_gradient(tmp_path):
    """Agent 1's winner/loser never reach agent 0's parameters except through the margin."""
    trainer, tok = _trainer(tmp_path)
    pair = _pair(tok)
    _, before = _trainer_gradients(trainer, pair)
    pair.loser_ids[1] = [9, 8, tok.eos_token_id]  # changes delta_1 only
    _, after = _trainer_gradients(trainer, pair)
    name = next(iter(before[0]))
    a, b = before[0][name].flatten(), after[0][name].flatten()
    cos = torch.nn.functional.cosine_similarity(a, b, dim=0)
    assert cos.item() == pytest.approx(1.0, abs=1e-4)  # same direction, other scale
    assert not torch.allclose(a, b)


def test_joint_logprob_scores_every_completion_token_including_eos(tmp_path):
    trainer, tok = _trainer(tmp_path)
    eos = tok.eos_token_id
    assert tok.pad_token_id == eos  # the hard case: EOS doubles as padding
    prompt = tok("Write a story about a cat.")["input_ids"]
    comps = [[11, 42, 7, eos], [11, 42, 7], [13, eos]]
    model = trainer.agents[0]
    with torch.no_grad():
        got = trainer.sequence_logps(0, [prompt] * 3, comps, grad=False)
        expected = [_manual_logp(model, prompt, c).item() for c in comps]
    assert got.tolist() == pytest.approx(expected, abs=1e-4)
    with torch.no_grad():
        eos_term = _manual_logp(model, prompt, [11, 42, 7, eos]) - _manual_logp(
            model, prompt, [11, 42, 7]
        )
    assert eos_term.item() < 0
    assert got[0].item() == pytest.approx(got[1].item() + eos_term.item(), abs=1e-4)


def test_dpo_update_steps_every_agent_once(tmp_path):
    trainer, tok = _trainer(tmp_path)
    pair = _pair(tok)
    before = [[p.detach().clone() for p in m.parameters()] for m in trainer.agents]
    metrics = trainer.dpo_update([pair])
    for i, m in enumerate(trainer.agents):
        assert any(not torch.equal(p, b) for p, b in zip(m.parameters(), before[i]))
        assert int(next(iter(trainer.optimizers[i].state.values()))["step"]) == 1
    for key in ("dpo/loss", "dpo/accuracy", "dpo/margin", "agent_0/margin", "agent_1/chosen_logp"):
        assert key in metrics


def test_nonfinite_loss_raises_or_is_skipped(tmp_path, monkeypatch):
    trainer, tok = _trainer(tmp_path)
    pair = _pair(tok)
    pair.reference_logps = [[float("nan"), 0.0], [0.0, 0.0]]
    trainer.args.reference_free = False
    with pytest.raises(FloatingPointError, match="nonfinite_loss"):
        trainer.dpo_update([pair])
    trainer.args.nonfinite_loss = "skip"
    with pytest.warns(UserWarning, match="non-finite"):
        assert trainer.dpo_update([pair]) is None
    assert trainer.run_state.skipped_nonfinite == 1


def _shared_pairs(tok):
    """Three pairs of one prompt that reuse candidates (one winner beats two losers; one loser
    loses twice), as DPO updates over K candidates produce."""
    eos = tok.eos_token_id
    p0 = tok("Write a story about a cat.")["input_ids"]
    p1 = tok("Write a story about the sea.")["input_ids"]
    a = [[11, 42, 7, eos], [5, 6, eos]]
    b = [[13, eos], [9, 8, 30, 31, 2]]
    c = [[21, 22, 23, 24, 25, eos], [5, 6, eos]]  # agent 1 wrote the same text as in ``a``

    def pair(w, lo):
        return PreferencePair(
            prompts=["a", "b"],
            winner_completions=["w0", "w1"],
            loser_completions=["l0", "l1"],
            prompt_ids=[p0, p1],
            winner_ids=[list(x) for x in w],
            loser_ids=[list(x) for x in lo],
            winner_reward=1.0,
            loser_reward=0.0,
            candidate_reward_mean=0.5,
        )

    return [pair(a, b), pair(a, c), pair(c, b)]


@pytest.mark.parametrize("reference_free", [True, False])
def test_pair_groups_under_a_token_cap_give_the_uncapped_gradient(tmp_path, reference_free):
    pairs = None
    results = []
    for cap in (None, 24):
        trainer, tok = _trainer(tmp_path, logprob_max_tokens=cap, reference_free=reference_free)
        if pairs is None:
            pairs = _shared_pairs(tok)
            for p, ref in zip(pairs, ([-3.0, -1.0], [-2.0, -4.0], [-1.5, -0.5])):
                p.reference_logps = [ref, [r / 2 for r in ref]]
        for m in trainer.agents:
            m.zero_grad(set_to_none=True)
        out = trainer.compute_dpo_loss(pairs, backward=True)
        grads = [
            {n: p.grad.clone() for n, p in m.named_parameters() if p.grad is not None}
            for m in trainer.agents
        ]
        results.append((out, grads))
    (out_a, grads_a), (out_b, grads_b) = results
    _assert_same(grads_a, grads_b)
    assert out_b.loss.item() == pytest.approx(out_a.loss.item(), abs=1e-5)
    for field in ("chosen", "rejected", "actor_margins"):
        for x, y in zip(getattr(out_a, field), getattr(out_b, field)):
            assert torch.allclose(x, y, atol=1e-4), field  # same pair order
    assert torch.allclose(out_a.margins, out_b.margins, atol=1e-4)


def test_distinct_rows_score_a_repeated_candidate_once(tmp_path):
    from comlrl.core.logprobs import distinct_rows, padded_tokens, padding_aware_micro_batches
    from comlrl.pbrl.pair_batches import pair_groups

    def actor_rows(members, i):
        """An actor's distinct rows of ``members``, winners then losers, as the update scores
        them."""
        return distinct_rows(
            [p.prompt_ids[i] for p in members] * 2,
            [p.winner_ids[i] for p in members] + [p.loser_ids[i] for p in members],
        )

    trainer, tok = _trainer(tmp_path)
    pairs = _shared_pairs(tok)
    _, completions, owner = actor_rows(pairs, 1)
    # agent 1: texts a == c, so two distinct rows serve six winner/loser slots
    assert len(completions) == 2
    assert owner[:3] == [0, 0, 0] and owner[3:] == [1, 0, 1]
    for cap in (None, 1, 24, 40, 10_000):
        groups = pair_groups(pairs, cap)
        assert sorted(j for g in groups for j in g) == [0, 1, 2]
        for g in groups:
            if len(g) == 1:
                continue  # a pair alone may exceed the cap
            for i in range(2):
                prompts, completions, _ = actor_rows([pairs[j] for j in g], i)
                p = [len(x) for x in prompts]
                c = [len(x) for x in completions]
                # the group's forwards (as the engine splits padded rows) fit the cap together
                split = padding_aware_micro_batches(p, c, cap)
                assert cap is None or padded_tokens(split, p, c) <= cap
    assert len(pair_groups(pairs, None)) == 1 and len(pair_groups(pairs, 1)) == 3


def test_reference_logprobs_score_each_distinct_candidate_once(tmp_path, monkeypatch):
    import comlrl.core.logprobs.engine as engine

    trainer, tok = _trainer(tmp_path, reference_free=False)
    pairs = _shared_pairs(tok)
    rows = []
    original = engine.plan

    def spy(*args, **kwargs):
        groups, kernel = original(*args, **kwargs)

        def counted(model, prompts, comps, pad, **kwargs):
            rows.append(len(comps))
            return kernel(model, prompts, comps, pad, **kwargs)

        return groups, counted

    monkeypatch.setattr(engine, "plan", spy)
    trainer.attach_reference_logps(pairs)
    assert sum(rows) == 3 + 2  # agent 0: three distinct candidates; agent 1: two
    with torch.no_grad():
        for p in pairs:
            for i, m in enumerate(trainer.agents):
                w = _manual_logp(m, p.prompt_ids[i], p.winner_ids[i]).item()
                lo = _manual_logp(m, p.prompt_ids[i], p.loser_ids[i]).item()
                assert p.reference_logps[i] == pytest.approx([w, lo], abs=1e-4)
