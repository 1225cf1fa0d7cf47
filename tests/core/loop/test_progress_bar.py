"""A stage's progress bar is closed on every way out of the stage, an error included (an open
bar otherwise prints itself again when it is garbage collected)."""

import pytest

from tests.reinforce.helpers import make_trainer


class RecordingBar:
    def __init__(self):
        self.closed = 0

    def update(self, n=1):
        pass

    def set_postfix(self, *args, **kwargs):
        pass

    def close(self):
        self.closed += 1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


@pytest.mark.parametrize("fails", [False, True])
def test_the_stage_bar_is_closed(tmp_path, fails):
    trainer = make_trainer(tmp_path, num_turns=1)
    bars = []

    def progress_bar(*args, **kwargs):
        bars.append(RecordingBar())
        return bars[-1]

    trainer.reporting.progress_bar = progress_bar
    if fails:

        def update(batch):
            raise RuntimeError("update failed")

        trainer.update = update
        with pytest.raises(RuntimeError, match="update failed"):
            trainer.train()
    else:
        trainer.train()
    assert bars and all(bar.closed >= 1 for bar in bars)
