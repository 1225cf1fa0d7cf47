"""Small builders shared by the preference-family tests."""

from comlrl.core.rewards import set_reward_range
from comlrl.core.testing import tiny_pair

PROMPTS = [
    {"prompt": f"Write a story about {t}."} for t in ("a cat", "the sea", "a robot", "winter")
]


def ratio_reward(a, b):
    """In [0, 1]; varies with the sampled lengths so candidates rarely tie."""
    return [min(1.0, (len(y) + 1) / (3.0 * (len(x) + 1))) for x, y in zip(a, b)]


set_reward_range(ratio_reward, 0.0, 1.0)

# Sampling and optimisation settings that keep every run to a few seconds on a CPU.
FAST = dict(
    max_new_tokens=6,
    temperature=1.0,
    top_p=1.0,
    top_k=None,
    agent_learning_rate=1e-3,
    logging_steps=1,
    eval_interval=0,
    seed=0,
)


def two_agents(seed: int = 0):
    """Two distinct tiny models sharing one tokenizer."""
    m0, tok = tiny_pair(seed=seed)
    m1, _ = tiny_pair(seed=seed + 1)
    return [m0, m1], tok


def snapshot(models):
    """Copies of every trainable parameter of ``models``."""
    return [
        {n: p.detach().clone() for n, p in m.named_parameters() if p.requires_grad} for m in models
    ]


def moved(models, snap) -> bool:
    """Whether every model changed at least one parameter since ``snap``."""
    return all(
        any(not p.detach().equal(s[n]) for n, p in m.named_parameters() if n in s)
        for m, s in zip(models, snap)
    )


def small_marlhf(run_dir, num_items: int = 2, **cfg):
    """A quiet MARLHF trainer on the tiny agents and ``num_items`` prompts, with a short RL phase
    (2 epochs of MAGRPO, 2 generations, rollout batches of one item, a buffer of 2 groups);
    ``cfg`` overrides the config."""
    from comlrl.pbrl import MARLHFConfig, MARLHFTrainer

    agents, tok = two_agents()
    values = dict(FAST)
    values.update(
        num_train_epochs=2,
        num_generations=2,
        rollout_buffer_size=2,
        rollout_batch_size=1,
        preference_num_candidates=3,
        preference_pairs_per_sample=2,
        reward_learning_rate=1e-3,
        output_dir=str(run_dir),
    )
    values.update(cfg)
    trainer = MARLHFTrainer(
        agents=agents,
        tokenizer=tok,
        train_dataset=PROMPTS[:num_items],
        reward_func=ratio_reward,
        args=MARLHFConfig(**values),
    )
    trainer.verbose = False
    return trainer
