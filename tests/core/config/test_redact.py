"""Which values count as secrets, and that redaction keeps everything else as it was."""

from __future__ import annotations

import pytest

from comlrl.core.checkpoint.fingerprint import config_fingerprint
from comlrl.core.config.redact import REDACTED, is_secret_name, redact, redacted_paths
from comlrl.core.logging.wandb_sink import wandb_init_kwargs


@pytest.mark.parametrize(
    "name",
    [
        "api_key",
        "comparator_api_key",
        "wandb_api_key",
        "apiKey",
        "access_token",
        "hf_token",
        "client_secret",
        "password",
        "db_password_plain",
        "Authorization",
        "Cookie",
        "key",
    ],
)
def test_secret_names(name):
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "comparator_api_key_env",
        "comparator_api_key_header",
        "comparator_api_key_prefix",
        "max_new_tokens",
        "max_tokens",
        "tokenizer",
        "pad_token",
        "eos_token_id",
        "keys",
        "prompt",
        "num_generations",
    ],
)
def test_names_that_only_point_at_secrets_or_are_not_secrets(name):
    assert not is_secret_name(name)


def test_redact_walks_configs_and_keeps_the_rest():
    cfg = {
        "comparator_api_headers": {"X-Api-Key": "s1", "Accept": "application/json"},
        "comparator_api_url": "https://bot:s2@host.example/v1?api_key=s3&model=m&token=s4",
        "comparator_api_key_env": "MY_KEY",
        "wandb": {"api_key": "s5", "project": "p"},
        "special_tokens": {"pad_token": "<pad>"},
        "notes": ["Bearer abcdefgh12345678", "Bearer of good news"],
        "max_new_tokens": 8,
        "empty_token": None,
    }
    out = redact(cfg)
    assert out["comparator_api_headers"] == {"X-Api-Key": REDACTED, "Accept": REDACTED}
    assert out["comparator_api_url"] == (
        f"https://bot:{REDACTED}@host.example/v1?api_key={REDACTED}&model=m&token={REDACTED}"
    )
    assert out["comparator_api_key_env"] == "MY_KEY"
    assert out["wandb"] == {"api_key": REDACTED, "project": "p"}
    assert out["special_tokens"] == {"pad_token": "<pad>"}
    assert out["notes"] == [REDACTED, "Bearer of good news"]
    assert out["max_new_tokens"] == 8 and out["empty_token"] is None
    assert cfg["wandb"]["api_key"] == "s5"  # a copy: the live config keeps its values
    assert "s1" not in str(out) and "s2" not in str(out) and "s5" not in str(out)
    assert sorted(redacted_paths(out))[:2] == [
        "comparator_api_headers.Accept",
        "comparator_api_headers.X-Api-Key",
    ]
    plain = "https://host.example/v1?q=a b"
    assert redact({"url": plain}) == {"url": plain}  # nothing secret: not even re-encoded


def test_manifest_fingerprint_and_wandb_config_are_redacted():
    class Args:
        def __init__(self):
            self.comparator_api_headers = {"Authorization": "Bearer topsecret-1234"}
            self.num_generations = 2

    fingerprint = config_fingerprint(Args())
    assert fingerprint == {
        "comparator_api_headers": {"Authorization": REDACTED},
        "num_generations": 2,
    }
    kwargs = wandb_init_kwargs(
        {"project": "p", "config_sections": {"wandb": {"api_key": "topsecret-5678"}}},
        {"model_name": "m"},
        "run",
    )
    assert kwargs["config"]["wandb"]["api_key"] == REDACTED
    assert kwargs["config"]["model_name"] == "m"
