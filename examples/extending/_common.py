"""What the extension examples share: a short length-ratio run on the tiny offline model."""

from comlrl.core.testing import tiny_model_dir
from comlrl.tasks.length_ratio import dataset, length_ratio_reward, story_prompt


def tiny_run(trainer_cls, config_cls, out: str, inputs: dict | None = None, **settings):
    """A two-agent length-ratio trainer of ``trainer_cls`` with a few quick settings
    (``settings`` go to the config, ``inputs`` to the trainer, e.g. a ``critic_model``)."""
    config = config_cls(
        num_train_epochs=1,
        num_generations=4,
        max_new_tokens=16,
        num_turns=1,
        temperature=1.0,
        top_p=1.0,
        top_k=None,
        rollout_buffer_size=2,
        agent_learning_rate=3e-3,
        logging_steps=1,
        eval_interval=0,
        seed=0,
        output_dir=out,
        **settings,
    )
    return trainer_cls(
        agent_model=tiny_model_dir(),
        num_agents=2,
        train_dataset=dataset()[:4],
        reward_func=length_ratio_reward,
        formatters=[story_prompt, story_prompt],
        args=config,
        **(inputs or {}),
    )
