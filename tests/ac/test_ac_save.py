"""save_model writes actors with their critics or value heads, in the reference's layout, and
the saved directories load back into new trainers with the same weights."""

import os

import pytest
import torch

from comlrl.ac import IACConfig, IACTrainer, MAACConfig, MAACTrainer

from .helpers import PROMPTS, config, length_reward


def _same_module(a, b, label):
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys(), label
    for key in sa:
        assert torch.equal(sa[key].cpu(), sb[key].cpu()), f"{label}: {key}"


def _train(trainer):
    trainer.verbose = False
    trainer.train()
    return trainer


@pytest.mark.parametrize("separate", [True, False])
def test_iac_save_and_reload(tmp_path, tiny_dir, separate):
    kwargs = {"critic_model": tiny_dir} if separate else {}
    trainer = _train(
        IACTrainer(
            agent_model=tiny_dir,
            reward_func=length_reward,
            train_dataset=PROMPTS[:2],
            args=config(IACConfig, use_separate_critic=separate, output_dir=str(tmp_path / "r")),
            **kwargs,
        )
    )
    out = tmp_path / "saved"
    trainer.save_model(str(out))
    for i in range(2):
        d = out / f"agent_{i}"
        assert (d / "config.json").exists() and (d / "tokenizer.json").exists()
        if separate:
            assert (d / "critic" / "config.json").exists()
            assert (d / "critic" / "value_head.pt").exists()
            assert not (d / "value_head.pt").exists()
        else:
            assert (d / "value_head.pt").exists() and not (d / "critic").exists()

    agents = [str(out / f"agent_{i}") for i in range(2)]
    kwargs = {"critics": [os.path.join(a, "critic") for a in agents]} if separate else {}
    again = IACTrainer(
        agents=agents,
        reward_func=length_reward,
        args=config(IACConfig, use_separate_critic=separate, output_dir=str(tmp_path / "r2")),
        **kwargs,
    )
    for i in range(2):
        _same_module(trainer.agents[i], again.agents[i], f"agent {i}")
        if separate:
            _same_module(trainer.critics[i], again.critics[i], f"critic {i}")
        else:
            _same_module(trainer.value_heads[i], again.value_heads[i], f"value head {i}")
    rows = [[1, 2, 3], [4, 5, 6, 7]]
    assert trainer.values_of(1, rows) == pytest.approx(again.values_of(1, rows), abs=1e-6)


def test_iac_single_agent_layout(tmp_path, tiny_dir):
    trainer = IACTrainer(
        agents=[tiny_dir],
        critics=[tiny_dir],
        reward_func=lambda c: [float(len(x)) for x in c],
        args=config(IACConfig, output_dir=str(tmp_path / "r")),
    )
    trainer.save_model(str(tmp_path / "saved"))
    assert (tmp_path / "saved" / "config.json").exists()
    assert (tmp_path / "saved" / "critic" / "value_head.pt").exists()


def test_maac_save_and_reload(tmp_path, tiny_dir):
    trainer = _train(
        MAACTrainer(
            agent_model=tiny_dir,
            critic_model=tiny_dir,
            reward_func=length_reward,
            train_dataset=PROMPTS[:2],
            args=config(MAACConfig, critic_value_head_hidden_dim=8, output_dir=str(tmp_path / "r")),
        )
    )
    out = tmp_path / "saved"
    trainer.save_model(str(out))
    assert (out / "agent_0" / "config.json").exists() and (out / "agent_1" / "config.json").exists()
    assert (out / "critic" / "value_head.pt").exists()
    assert not (out / "agent_0" / "critic").exists()
    again = MAACTrainer(
        agents=[str(out / "agent_0"), str(out / "agent_1")],
        critic_model=str(out / "critic"),
        reward_func=length_reward,
        args=config(MAACConfig, output_dir=str(tmp_path / "r2")),
    )
    assert again.critic.value_head.hidden_dim == 8  # read from the saved head
    _same_module(trainer.critic, again.critic, "critic")
    with pytest.raises(ValueError, match="hidden dim"):
        MAACTrainer(
            agents=[str(out / "agent_0"), str(out / "agent_1")],
            critic_model=str(out / "critic"),
            reward_func=length_reward,
            args=config(MAACConfig, critic_value_head_hidden_dim=4),
        )
