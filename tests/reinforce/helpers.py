"""Small builders shared by the REINFORCE tests."""

from types import SimpleNamespace

from comlrl.core.testing import tiny_pair
from comlrl.reinforce import MAGRPOConfig, MAGRPOTrainer

PROMPTS = [
    {"prompt": f"Write a story about {t}."} for t in ("a cat", "the sea", "a robot", "winter")
]


# ``comlrl train --override`` settings of a tiny one-epoch MAGRPO run of the default demo.
TINY_CLI_RUN = [
    "magrpo.num_train_epochs=1",
    "magrpo.num_generations=2",
    "magrpo.max_new_tokens=4",
    "magrpo.rollout_buffer_size=2",
    "dataset.train_limit=2",
    "output.save_final_model=false",
]


def length_reward(a, b):
    """Varies with the sampled lengths, so advantages are non-zero."""
    return [float(len(y) - len(x)) / 10.0 for x, y in zip(a, b)]


def make_config(**overrides):
    base = dict(
        num_train_epochs=1,
        num_generations=2,
        max_new_tokens=8,
        num_turns=1,
        temperature=1.0,
        top_p=1.0,
        top_k=None,
        rollout_buffer_size=2,
        agent_learning_rate=1e-3,
        logging_steps=1,
        eval_interval=0,
        seed=0,
    )
    base.update(overrides)
    return MAGRPOConfig(**base)


def make_trainer(tmp_path, reward=length_reward, agents=None, tokenizer=None, **cfg):
    if agents is None:
        m0, tok = tiny_pair(seed=0)
        m1, _ = tiny_pair(seed=1)
        agents, tokenizer = [m0, m1], tok
    cfg.setdefault("output_dir", str(tmp_path / "run"))
    return MAGRPOTrainer(
        agents=agents,
        tokenizer=tokenizer,
        train_dataset=PROMPTS[:2],
        reward_func=reward,
        args=make_config(**cfg),
    )


def advantages_of(returns, mode, normalize, baseline=None):
    """One group's advantages through the trainer's own path
    (:func:`comlrl.reinforce.algos.group_advantages`), with a measured ``baseline`` for the
    greedy mode."""
    import torch

    from comlrl.reinforce.algos import group_advantages

    config = SimpleNamespace(
        advantage_mode=mode,
        advantage_normalization=normalize,
        advantage_normalization_scope="group",
    )
    r = torch.as_tensor([list(returns)], dtype=torch.float64)
    b = None if baseline is None else torch.tensor([float(baseline)], dtype=torch.float64)
    return group_advantages(r, config, baseline=b)[0]
