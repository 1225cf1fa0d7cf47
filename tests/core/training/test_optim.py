"""The AdamW every trainer builds: fused where it applies, the same update rule either way."""

import pytest
import torch

from comlrl.core.training.optim import build_adamw


def _linear(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Linear(8, 4)


def _steps(opt, model, n=3):
    torch.manual_seed(1)
    for _ in range(n):
        opt.zero_grad()
        model(torch.randn(5, 8)).pow(2).sum().backward()
        opt.step()


@pytest.mark.skipif(torch.__version__ < "2.4", reason="CPU fused AdamW needs torch 2.4")
def test_dense_cpu_parameters_get_the_fused_kernel():
    opt = build_adamw(_linear().parameters(), lr=1e-2, weight_decay=0.1)
    assert opt.param_groups[0]["fused"] is True
    assert opt.param_groups[0]["weight_decay"] == 0.1


def test_fused_and_default_updates_agree():
    fast, plain = _linear(), _linear()
    _steps(build_adamw(fast.parameters(), lr=1e-2, weight_decay=0.1), fast)
    _steps(torch.optim.AdamW(plain.parameters(), lr=1e-2, weight_decay=0.1), plain)
    for a, b in zip(fast.parameters(), plain.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_param_groups_are_accepted_and_an_explicit_choice_is_kept():
    model = _linear()
    groups = [{"params": [model.weight], "lr": 1e-2}, {"params": [model.bias], "lr": 1e-3}]
    opt = build_adamw(groups, lr=1e-2, foreach=False)
    assert [g["lr"] for g in opt.param_groups] == [1e-2, 1e-3]
    assert not opt.param_groups[0]["fused"]


def test_tensors_the_fused_kernel_cannot_take_keep_the_default():
    from comlrl.core.training.optim import _fused_ready

    assert not _fused_ready([torch.zeros(3, dtype=torch.int64)])
    assert not _fused_ready([torch.zeros(3, device="meta")])
    assert not _fused_ready([])
