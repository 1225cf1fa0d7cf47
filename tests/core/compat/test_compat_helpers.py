"""The 1.4.3 helpers kept for user code: tokenizer specials, W&B verbosity, reference KL, and
the DeviceScheduler facade."""

import copy
from types import SimpleNamespace

import pytest
import torch

from comlrl.core.testing import build_model, tiny_pair
from comlrl.schedulers import DeviceScheduler
from comlrl.utils.reference_kl import (
    clone_reference_models,
    reference_kl_coef,
    reference_kl_enabled,
    reference_kl_for_sequence,
    resolve_reference_devices,
    validate_reference_kl_config,
)
from comlrl.utils.tokenizer_utils import apply_tokenizer_specials, ensure_tokenizer
from comlrl.utils.wandb_utils import verbose_from_wandb_config, wandb_init_kwargs


class _Tok:
    def __init__(self, pad=None, eos="</s>"):
        self.pad_token, self.eos_token = pad, eos
        self.eos_token_id = 7 if eos else None

    @property
    def pad_token_id(self):
        if self.pad_token is None:
            return None
        return 7 if self.pad_token == self.eos_token else 3


def test_ensure_tokenizer_pads_with_eos_and_rejects_model_objects():
    tok = ensure_tokenizer("unused-name", _Tok())
    assert tok.pad_token == "</s>"
    with pytest.raises(ValueError, match="tokenizer must be given"):
        ensure_tokenizer(object(), None)


def test_apply_tokenizer_specials_writes_ids_into_plain_and_wrapped_configs():
    plain = SimpleNamespace(config=SimpleNamespace(pad_token_id=None, eos_token_id=None))
    wrapped = SimpleNamespace(model=SimpleNamespace(config=SimpleNamespace()))
    apply_tokenizer_specials(_Tok(pad="<pad>"), [plain, None, wrapped])
    assert (plain.config.pad_token_id, plain.config.eos_token_id) == (3, 7)
    assert (wrapped.model.config.pad_token_id, wrapped.model.config.eos_token_id) == (3, 7)


def test_verbose_from_wandb_config_reads_the_output_section():
    assert verbose_from_wandb_config(None) is True
    assert verbose_from_wandb_config({"config_sections": {"output": {}}}) is True
    assert verbose_from_wandb_config({"config_sections": {"output": {"verbose": 0}}}) is False


def test_wandb_init_kwargs_takes_the_two_argument_form():
    run_config = {"lr": 1e-5}
    kwargs = wandb_init_kwargs({"project": "p", "run_name": "r"}, run_config)
    assert (kwargs["project"], kwargs["name"], kwargs["config"]["lr"]) == ("p", "r", 1e-5)


def test_reference_kl_config_readers_and_validation():
    args = SimpleNamespace(reference_kl_enabled=True, reference_kl_coef=0.5, reference_devices=None)
    assert reference_kl_enabled(args) and reference_kl_coef(args) == 0.5
    assert (
        not reference_kl_enabled(SimpleNamespace()) and reference_kl_coef(SimpleNamespace()) == 0.1
    )
    with pytest.raises(ValueError, match="reference_kl_coef"):
        validate_reference_kl_config(SimpleNamespace(reference_kl_coef=-1.0), 2)
    bad = SimpleNamespace(reference_kl_enabled=True, reference_devices=["cpu", "cpu", "cpu"])
    with pytest.raises(ValueError, match="reference_devices length"):
        validate_reference_kl_config(bad, 2)


def test_resolve_reference_devices_falls_back_and_broadcasts():
    fallback = [torch.device("cpu")] * 2
    assert resolve_reference_devices(SimpleNamespace(), fallback, 2) == fallback
    got = resolve_reference_devices(SimpleNamespace(reference_devices="cpu"), [], 3)
    assert got == [torch.device("cpu")] * 3


def test_device_scheduler_assigns_agents_and_critics():
    agents, critics = DeviceScheduler.assign_devices(2, "cpu", None, use_separate_critic=True)
    assert agents == critics == [torch.device("cpu")] * 2
    assert DeviceScheduler.resolve_single_device(None, ["cpu"]) == torch.device("cpu")
    assert DeviceScheduler.assign_shared_critic_device(agents, None) == torch.device("cpu")
    with pytest.raises(ValueError, match="critic_devices count must be >= 1"):
        DeviceScheduler.resolve_devices("cpu", 0, kind="critic_devices")


def test_reference_kl_for_sequence_is_zero_for_a_copy_and_positive_otherwise():
    policy, tok = tiny_pair()
    other = build_model(tok, seed=1)
    ids = torch.tensor([tok.encode("a cat sat on the mat and the dog ran")[:10]] * 2)
    mask = torch.ones_like(ids)
    (same,) = clone_reference_models([policy], devices=[torch.device("cpu")])
    assert not any(p.requires_grad for p in same.parameters())
    zero = reference_kl_for_sequence(policy, same, ids, mask, prompt_len=4, response_len=5)
    assert zero.shape == (2,)
    assert torch.allclose(zero, torch.zeros(2), atol=1e-5)
    kl = reference_kl_for_sequence(policy, other, ids, mask, prompt_len=4, response_len=5)
    assert bool((kl > 1e-4).all())
    # It scores in eval mode (no dropout) but must hand the policy back still training.
    policy.train()
    reference_kl_for_sequence(policy, copy.deepcopy(other), ids, mask, 4, 5)
    assert policy.training


def test_utils_call_reward_function_takes_prompts_first_as_in_143():
    from comlrl.utils import call_reward_function

    seen = []

    def reward(a, b, prompts=None):
        seen.append((a, b, prompts))
        return (1, 2.5)

    out = call_reward_function(reward, ["p0", "p1"], [["x", "y"], ["u", "v"]], num_agents=2)
    assert out == [1.0, 2.5]
    assert seen == [(["x", "y"], ["u", "v"], ["p0", "p1"])]
    with pytest.raises(TypeError):
        # Two positional arguments were our own order; the compat path wants prompts first.
        call_reward_function(reward, [["x"], ["u"]], num_agents=2)


def test_joint_sequence_log_prob_sums_the_completion_and_stops_at_padding():
    from comlrl.trainers.preference.collaboration import joint_sequence_log_prob

    model, tok = tiny_pair()
    prompt = torch.tensor(tok.encode("the cat sat")[:4])
    target = torch.tensor(tok.encode(" on the mat")[:3] + [tok.eos_token_id])
    padded = torch.cat([target, torch.full((3,), tok.pad_token_id)])
    model.eval()
    logits = model(torch.cat([prompt, target[:-1]])[None]).logits[0, len(prompt) - 1 :]
    expected = torch.log_softmax(logits.float(), -1).gather(1, target[:, None]).sum()
    got = joint_sequence_log_prob(model, tok, prompt, padded)
    # pad == EOS for this tokenizer, so the first pad is the EOS and is scored.
    assert tok.pad_token_id == tok.eos_token_id
    assert torch.allclose(got, expected, atol=1e-4)
    got.backward()
    assert any(p.grad is not None for p in model.parameters())
    empty = joint_sequence_log_prob(model, tok, prompt, torch.tensor([], dtype=torch.long))
    assert empty.item() == 0.0 and empty.requires_grad
    with pytest.raises(ValueError, match="non-empty tokenized prompt"):
        joint_sequence_log_prob(model, tok, prompt[:0], target)
