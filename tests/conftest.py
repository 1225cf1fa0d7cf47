"""Shared fixtures: tiny offline models, built once per machine and cached on disk."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402
import torch  # noqa: E402

# One thread by default (the suite runs in parallel workers); COMLRL_TEST_TORCH_THREADS checks
# that results hold under another split of the reductions.
torch.set_num_threads(int(os.environ.get("COMLRL_TEST_TORCH_THREADS", "1")))


@pytest.fixture(scope="session")
def tiny_dir() -> str:
    """A tiny, briefly pre-trained Qwen2-style model + tokenizer saved to disk."""
    from comlrl.core.testing import tiny_model_dir

    return tiny_model_dir()


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_dir)


@pytest.fixture
def tiny_model(tiny_dir):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_dir)


@pytest.fixture(scope="session", params=["qwen2", "llama"])
def hub_dir(request) -> str:
    """A tiny checkpoint saved like a hub one (bf16 safetensors, a tokenizer with a chat
    template and special tokens), for each of the Qwen2 and Llama families; load it by path."""
    from comlrl.core.testing import hub_model_dir

    return hub_model_dir(arch=request.param)
