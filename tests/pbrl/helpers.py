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
