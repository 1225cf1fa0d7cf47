"""Training keeps the direct decode step: the scoring forwards of an update must not leave the
models in a state that sends later rollouts through ``model.forward``."""

from comlrl.core.rollout import generation

from .helpers import make_trainer


def test_every_rollout_decodes_with_the_direct_step(tmp_path, monkeypatch):
    chosen = []
    real = generation.choose_decoder

    def spy(model, gen_kwargs, mode):
        decoder = real(model, gen_kwargs, mode)
        chosen.append(decoder)
        return decoder

    monkeypatch.setattr(generation, "choose_decoder", spy)
    # Two epochs of two prompts, a buffer of two nodes: rollouts after the first update too.
    trainer = make_trainer(tmp_path, num_train_epochs=2, rollout_batch_size=1)
    trainer.train()
    # 2 agents x 2 items x 2 epochs
    assert chosen == ["direct"] * 8
