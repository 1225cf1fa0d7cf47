"""Construction: cheap errors fire before any model or tokenizer loads; critics are built and
placed as configured."""

import pytest
import torch

from comlrl.ac import IACConfig, IACTrainer, MAACConfig, MAACTrainer
from comlrl.ac.critic_models import ValueModel

from .helpers import config, fresh_pair, length_reward, transition


@pytest.fixture
def no_loading(monkeypatch):
    """Fail the test if anything tries to load a model or tokenizer."""
    import transformers

    import comlrl.ac.critic_models as values
    import comlrl.core.models.loading as loading

    def refuse(*args, **kwargs):
        raise AssertionError(f"a model or tokenizer was loaded: {args}")

    monkeypatch.setattr(loading, "load_causal_lm", refuse)
    monkeypatch.setattr(values, "load_value_model", refuse)
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", refuse)
    monkeypatch.setattr(transformers.AutoModel, "from_pretrained", refuse)


NAME = "/nonexistent/model"


@pytest.mark.parametrize("cls", [IACTrainer, MAACTrainer])
def test_missing_reward_func(no_loading, cls):
    for bad in (None, "not callable"):
        with pytest.raises(ValueError, match="reward_func"):
            cls(
                agent_model=NAME,
                critic_model=NAME,
                reward_func=bad,
                args=config(cls.default_config_cls),
            )


@pytest.mark.parametrize("cls", [IACTrainer, MAACTrainer])
def test_missing_agents(no_loading, cls):
    with pytest.raises(ValueError, match="agent_model or agents"):
        cls(critic_model=NAME, reward_func=length_reward, args=config(cls.default_config_cls))


@pytest.mark.parametrize("cls", [IACTrainer, MAACTrainer])
def test_multi_turn_needs_external_transition(no_loading, cls):
    with pytest.raises(ValueError, match="external_transition"):
        cls(
            agent_model=NAME,
            critic_model=NAME,
            reward_func=length_reward,
            args=config(cls.default_config_cls, num_turns=2, num_generations=1),
        )


def test_critics_with_value_heads(no_loading):
    args = config(IACConfig, use_separate_critic=False)
    for kwargs in ({"critic_model": NAME}, {"critics": [NAME, NAME]}):
        with pytest.raises(ValueError, match="use_separate_critic"):
            IACTrainer(agent_model=NAME, reward_func=length_reward, args=args, **kwargs)


def test_separate_critics_must_be_given(no_loading):
    with pytest.raises(ValueError, match="critics must be provided"):
        IACTrainer(agent_model=NAME, reward_func=length_reward, args=config(IACConfig))
    with pytest.raises(ValueError, match="critics must be provided"):
        MAACTrainer(agent_model=NAME, reward_func=length_reward, args=config(MAACConfig))


@pytest.mark.parametrize("count", [1, 3])
def test_iac_critics_length(no_loading, count):
    with pytest.raises(ValueError, match="critics length"):
        IACTrainer(
            agent_model=NAME,
            critics=[NAME] * count,
            reward_func=length_reward,
            args=config(IACConfig),
        )


def test_maac_critics_length(no_loading):
    with pytest.raises(ValueError, match="critics length"):
        MAACTrainer(
            agent_model=NAME,
            critics=[NAME, NAME],
            reward_func=length_reward,
            args=config(MAACConfig),
        )


@pytest.mark.parametrize("cls", [IACTrainer, MAACTrainer])
def test_tokenizers_length(no_loading, cls):
    m, tok = fresh_pair()
    with pytest.raises(ValueError, match="tokenizers length"):
        cls(
            agents=[m, m],
            critic_model=NAME,
            tokenizer=[tok],
            reward_func=length_reward,
            args=config(cls.default_config_cls),
        )


@pytest.mark.parametrize("cls", [IACConfig, MAACConfig])
def test_multi_turn_with_several_generations(cls):
    with pytest.raises(ValueError, match="num_generations"):
        cls(num_turns=2, num_generations=2)


def test_other_cheap_errors(no_loading):
    with pytest.raises(ValueError, match="conflict"):
        IACTrainer(
            agent_model=NAME,
            critic_model=NAME,
            critics=[NAME, "/other"],
            reward_func=length_reward,
            args=config(IACConfig),
        )
    with pytest.raises(ValueError, match="critic_model should be a model name"):
        IACTrainer(
            agent_model=NAME,
            critic_model=torch.nn.Linear(2, 2),
            reward_func=length_reward,
            args=config(IACConfig),
        )
    with pytest.raises(ValueError, match="args must be a IACConfig"):
        IACTrainer(
            agent_model=NAME, critic_model=NAME, reward_func=length_reward, args=MAACConfig()
        )
    with pytest.raises(ValueError, match="metrics_callback"):
        IACTrainer(
            agent_model=NAME,
            critic_model=NAME,
            reward_func=length_reward,
            metrics_callback=3,
            args=config(IACConfig),
        )
    with pytest.raises(ValueError, match="num_agents"):
        IACTrainer(
            agents=[NAME] * 3,
            critic_model=NAME,
            reward_func=length_reward,
            args=config(IACConfig, num_agents=2),
        )


def test_num_agents_keyword_is_checked(no_loading):
    with pytest.raises(ValueError, match="num_agents"):
        IACTrainer(
            agent_model=NAME,
            critic_model=NAME,
            num_agents=3,
            reward_func=length_reward,
            args=config(IACConfig, num_agents=2),
        )
    with pytest.raises(ValueError, match="critics length"):
        # num_agents=3 builds three agents, so two critics are one short
        IACTrainer(
            agent_model=NAME,
            critics=[NAME, NAME],
            num_agents=3,
            reward_func=length_reward,
            args=config(IACConfig),
        )


def test_iac_builds_one_independent_critic_per_agent(tmp_path, tiny_dir):
    trainer = IACTrainer(
        agent_model=tiny_dir,
        critic_model=tiny_dir,
        reward_func=length_reward,
        args=config(IACConfig, output_dir=str(tmp_path / "r")),
    )
    assert len(trainer.critics) == 2 and trainer.value_heads == []
    assert all(isinstance(c, ValueModel) for c in trainer.critics)
    assert trainer.critics[0] is not trainer.critics[1]
    p0 = next(trainer.critics[0].parameters())
    p1 = next(trainer.critics[1].parameters())
    assert p0.data_ptr() != p1.data_ptr()
    # a critic is a body without LM head: no vocabulary projection anywhere in it
    assert not hasattr(trainer.critics[0].backbone, "lm_head")
    assert len(trainer.agent_optimizers) == 2 and len(trainer.critic_optimizers) == 2
    assert len(trainer.optimizers_list()) == 4
    assert set(trainer.trainable_models()) == {"agent_0", "agent_1", "critic_0", "critic_1"}


def test_iac_value_heads_live_on_the_actors():
    m0, tok = fresh_pair(0)
    m1, _ = fresh_pair(1)
    trainer = IACTrainer(
        agents=[m0, m1],
        tokenizer=tok,
        reward_func=length_reward,
        args=config(IACConfig, use_separate_critic=False, value_head_hidden_dim=8),
    )
    assert trainer.critics == [] and trainer.critic_optimizers == []
    assert len(trainer.value_heads) == 2 and trainer.value_heads[0].hidden_dim == 8
    head_params = {id(p) for p in trainer.value_heads[0].parameters()}
    opt_params = {id(p) for g in trainer.agent_optimizers[0].param_groups for p in g["params"]}
    assert head_params <= opt_params
    assert set(trainer.trainable_models()) == {"agent_0", "agent_1", "value_head_0", "value_head_1"}


def test_critic_that_is_the_actor_is_rejected():
    m0, tok = fresh_pair(0)
    m1, _ = fresh_pair(1)
    with pytest.raises(ValueError, match="use_separate_critic=False"):
        IACTrainer(
            agents=[m0, m1],
            critics=[m0, fresh_pair(2)[0]],
            tokenizer=tok,
            reward_func=length_reward,
            args=config(IACConfig),
        )
    with pytest.raises(ValueError, match="agents' own models"):
        MAACTrainer(
            agents=[m0, m1],
            critic_model=m1,
            tokenizer=tok,
            reward_func=length_reward,
            args=config(MAACConfig),
        )


def test_critic_head_dim_from_model_config_or_args():
    m0, tok = fresh_pair(0)
    trainer = MAACTrainer(
        agents=[m0, fresh_pair(1)[0]],
        critic_model=fresh_pair(2)[0],
        tokenizer=tok,
        reward_func=length_reward,
        model_config={"critic_value_head_hidden_dim": 12},
        args=config(MAACConfig),
    )
    assert trainer.critic.value_head.hidden_dim == 12
    with pytest.raises(ValueError, match="critic_value_head_hidden_dim"):
        MAACTrainer(
            agents=[m0, fresh_pair(1)[0]],
            critic_model=fresh_pair(2)[0],
            tokenizer=tok,
            reward_func=length_reward,
            model_config={"critic_value_head_hidden_dim": 12},
            args=config(MAACConfig, critic_value_head_hidden_dim=4),
        )


def test_critic_devices_must_match_in_single_device_mode():
    m0, tok = fresh_pair(0)
    with pytest.raises(ValueError, match="critic_devices"):
        IACTrainer(
            agents=[m0, fresh_pair(1)[0]],
            critics=[fresh_pair(2)[0], fresh_pair(3)[0]],
            tokenizer=tok,
            reward_func=length_reward,
            args=config(IACConfig, agent_devices="cpu", critic_devices="meta"),
        )


def test_mp_places_critics_on_their_devices(tmp_path):
    m0, tok = fresh_pair(0)
    trainer = MAACTrainer(
        agents=[m0, fresh_pair(1)[0]],
        critic_model=fresh_pair(2)[0],
        tokenizer=tok,
        reward_func=length_reward,
        train_dataset=[{"prompt": "Write a story about a cat."}],
        external_transition=transition,
        args=config(
            MAACConfig,
            parallel_training="mp",
            agent_devices=["cpu", "cpu"],
            critic_devices=["cpu"],
            output_dir=str(tmp_path / "r"),
        ),
    )
    assert next(trainer.critic.parameters()).device.type == "cpu"
    trainer.train()
    assert trainer.env_step == 2


def test_a_tokenizer_without_a_size_is_not_vocab_checked():
    # 1.4.3 accepted any tokenizer-like object with pad/EOS ids; the critic's vocabulary check
    # needs len(tokenizer), so it is skipped for such an object instead of raising TypeError.
    from types import SimpleNamespace

    (actor_a, tok), (critic_a, _) = fresh_pair(0), fresh_pair(1)
    stub = SimpleNamespace(
        pad_token=tok.pad_token,
        eos_token=tok.eos_token,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
    )
    trainer = IACTrainer(
        agents=[actor_a],
        critics=[critic_a],
        tokenizer=stub,
        reward_func=lambda a: [0.0] * len(a),
        args=config(IACConfig, num_agents=1),
    )
    assert len(trainer.critics) == 1
