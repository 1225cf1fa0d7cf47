"""Model sources, tokenizers and special tokens."""

import pytest

from comlrl.core.models import (
    add_special_tokens,
    infer_model_name,
    load_agents,
    resolve_model_sources,
    resolve_tokenizers,
)
from comlrl.core.testing import tiny_pair


def test_sources_homogeneous_and_heterogeneous():
    assert resolve_model_sources("m", None, 3) == ["m", "m", "m"]
    assert resolve_model_sources(None, ["a", "b"], None) == ["a", "b"]
    assert resolve_model_sources("m", ["m", "m"], 2) == ["m", "m"]
    with pytest.raises(ValueError, match="conflict"):
        resolve_model_sources("m", ["m", "x"], 2)
    with pytest.raises(ValueError, match="agents length"):
        resolve_model_sources("m", ["m"], 2)
    with pytest.raises(ValueError, match="non-null"):
        resolve_model_sources(None, ["a", None], None)
    with pytest.raises(ValueError, match="non-empty"):
        resolve_model_sources(None, "ab", None)


def test_mixed_list_loads_names_and_keeps_objects(tiny_dir):
    model, _ = tiny_pair()
    agents = load_agents([tiny_dir, model, tiny_dir])
    assert agents[1] is model
    assert agents[0] is not agents[2]  # one load, then an independent copy
    assert infer_model_name(tiny_dir) == tiny_dir


def test_tokenizers_one_list_or_loaded(tiny_dir):
    model, tok = tiny_pair()
    assert resolve_tokenizers(tok, [model, model]) == [tok, tok]
    with pytest.raises(ValueError, match="tokenizers length"):
        resolve_tokenizers([tok], [model, model])
    with pytest.raises(ValueError, match="must be provided"):
        resolve_tokenizers(None, [model])
    loaded = resolve_tokenizers(None, [tiny_dir, tiny_dir])
    assert loaded[0] is loaded[1] and loaded[0].pad_token_id is not None


def test_special_tokens_resize_embeddings():
    model, tok = tiny_pair()
    before = model.get_input_embeddings().weight.shape[0]
    add_special_tokens([tok, tok], [model, model], {"additional_special_tokens": ["<agent_0>"]})
    assert len(tok) == before + 1
    assert model.get_input_embeddings().weight.shape[0] >= len(tok)
    ids = tok("<agent_0> hi")["input_ids"]
    assert max(ids) < model.get_input_embeddings().weight.shape[0]
