"""The learning benchmark's post-hoc scorer on a centralized writer."""

from __future__ import annotations


def test_centralized_writer_is_scored_on_its_split_roles(tmp_path):
    from benchmarks.learning import catalogue, posthoc, runfile
    from comlrl.core.commands.launch import build_trainer
    from comlrl.tasks.length_ratio import length_ratio_reward

    run, _ = runfile.run_file(catalogue.BY_NAME["centralized_magrpo"], "length_ratio", seed=0)
    trainer = build_trainer(run, str(tmp_path))
    collaboration = trainer.collaboration
    before = collaboration.recording
    items = posthoc.length_ratio_items()[:2]

    scores = posthoc.posthoc_score(trainer, items=items, samples_per_prompt=2)
    # the benchmark passes the trainer's own reward (the collaboration): the same scores
    as_trained = posthoc.posthoc_score(
        trainer, items=items, reward_func=trainer.reward_func, samples_per_prompt=2
    )
    assert as_trained == scores

    # the same samples, split by hand, give the same reward
    roles, fractions = posthoc.centralized_texts(trainer, collaboration, items, 2, 12345)
    expected = length_ratio_reward(roles[0], roles[1])
    assert scores["posthoc_samples"] == 4.0
    assert abs(scores["posthoc_reward"] - sum(expected) / 4) < 1e-12
    credited = sum(r * f for r, f in zip(expected, fractions)) / 4
    assert abs(scores["posthoc_credited_reward"] - credited) < 1e-12
    assert scores["posthoc_complete_layouts"] == sum(f == 1.0 for f in fractions) / 4
    # scoring leaves the training records' parse-failure window untouched
    assert collaboration.recording is before
    assert collaboration.layout_window.flush() == {}
