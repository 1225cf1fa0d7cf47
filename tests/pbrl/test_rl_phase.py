"""MARLHF drives its RL algorithm through the core contract: the loop fills the algorithm's
buffer, an RL epoch ends by updating on the buffer's remainder, and the run counts one env step
and one set of optimizer steps."""

from .helpers import small_marlhf


def test_an_rl_epoch_ends_by_updating_on_the_buffers_remainder(tmp_path):
    trainer = small_marlhf(tmp_path / "run", num_items=3)
    rl = trainer.rl_trainer
    assert trainer.rollout_buffer is rl.rollout_buffer
    sizes = []
    update = rl.update

    def recording(experience):
        sizes.append(len(experience.samples[0]))
        return update(experience)

    rl.update = recording
    trainer.train()
    # 3 items (one rollout group each) per epoch: a full buffer of 2, then the remainder of 1
    assert sizes == [2, 1, 2, 1]
    assert rl.rollout_buffer.empty()
    # one run state for the run: the RL algorithm counts in MARLHF's
    assert rl.run_state is trainer.run_state and trainer.env_step == 12
    assert trainer.run_state.optimizer_steps() == 4


def test_max_steps_counts_the_rl_phase_s_optimizer_steps(tmp_path):
    trainer = small_marlhf(tmp_path / "run", num_items=3, max_steps=1)
    trainer.train()
    assert trainer.run_state.optimizer_steps() == 1
