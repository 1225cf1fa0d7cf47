"""Small builders shared by the actor-critic tests."""

import copy
import functools

from comlrl.ac import IACConfig, IACTrainer, MAACConfig, MAACTrainer
from comlrl.core.testing import tiny_pair

PROMPTS = [
    {"prompt": f"Write a story about {t}."} for t in ("a cat", "the sea", "a robot", "winter")
]


def length_reward(a, b):
    """Varies with the sampled lengths, so advantages and value targets are non-zero."""
    return [float(len(y) - len(x)) / 10.0 for x, y in zip(a, b)]


def transition(
    *, prompt, agent_completions, num_agents, prompt_history_per_agent, response_history_per_agent
):
    """A two-agent feedback step that only appends to the prompt."""
    return [f"{prompt} Again." for _ in range(num_agents)]


@functools.lru_cache(maxsize=4)
def _pair(seed: int):
    return tiny_pair(seed=seed)


def fresh_pair(seed: int = 0):
    """A deep copy of a tiny in-memory (model, tokenizer): independent weights per call."""
    model, tok = _pair(seed)
    return copy.deepcopy(model), tok


def config(cls, **overrides):
    base = dict(
        num_train_epochs=1,
        num_generations=2,
        max_new_tokens=8,
        num_turns=1,
        temperature=1.0,
        top_p=1.0,
        top_k=None,
        rollout_buffer_size=4,
        agent_learning_rate=1e-3,
        logging_steps=1,
        eval_interval=0,
        seed=0,
    )
    base.update(overrides)
    return cls(**base)


def make_iac(tmp_path, reward=length_reward, separate=True, dataset=None, **cfg):
    m0, tok = fresh_pair(0)
    m1, _ = fresh_pair(1)
    critics = [fresh_pair(2)[0], fresh_pair(3)[0]] if separate else None
    cfg.setdefault("output_dir", str(tmp_path / "run"))
    return IACTrainer(
        agents=[m0, m1],
        critics=critics,
        tokenizer=tok,
        train_dataset=PROMPTS[:2] if dataset is None else dataset,
        reward_func=reward,
        external_transition=transition if cfg.get("num_turns", 1) > 1 else None,
        args=config(IACConfig, use_separate_critic=separate, **cfg),
    )


def make_maac(tmp_path, reward=length_reward, dataset=None, **cfg):
    m0, tok = fresh_pair(0)
    m1, _ = fresh_pair(1)
    cfg.setdefault("output_dir", str(tmp_path / "run"))
    return MAACTrainer(
        agents=[m0, m1],
        critic_model=fresh_pair(2)[0],
        tokenizer=tok,
        train_dataset=PROMPTS[:2] if dataset is None else dataset,
        reward_func=reward,
        external_transition=transition if cfg.get("num_turns", 1) > 1 else None,
        args=config(MAACConfig, **cfg),
    )


def script_critic(trainer, values):
    """Make the trainer's critic answer the first ``len(rows)`` of ``values`` on every call
    (IAC's ``values_of`` takes the agent too)."""
    if isinstance(trainer, IACTrainer):
        trainer.values_of = lambda agent, rows: values[: len(rows)]
    else:
        trainer.values_of = lambda rows: values[: len(rows)]


def flat(groups, field):
    """Every completion's ``field`` (a per-completion list of the groups) over a buffer of
    rollout groups, in order."""
    return [v for g in groups for v in getattr(g, field)]
