"""The mixed-adapter benchmark compares like with like: one mixed call over every agent's rows
gives each row its own adapter's log-probs and greedy tokens, as one call per agent does."""

import pytest

pytest.importorskip("peft")

from benchmarks.mixed_adapters import measure  # noqa: E402
from comlrl.core.testing import tiny_model_dir  # noqa: E402


def test_mixed_batches_equal_one_call_per_agent():
    out = measure(tiny_model_dir(), n=3, rows=2, prompt_len=6, new_tokens=3, repeats=1)
    assert out["greedy_decodes_equal"]
    assert out["max_logprob_difference"] < 1e-5
    assert out["other_adapter_difference"] > 1e-3  # a row through the wrong adapter would show
    assert {"decode_speedup", "score_speedup"} <= set(out)
