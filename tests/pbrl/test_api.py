"""The API comparator against a local stub server: formats, retries, errors, key hygiene."""

import logging
import os

import pytest

from comlrl.pbrl import MADPOIterConfig, MADPOIterTrainer
from comlrl.pbrl.api import ApiClient, ApiSettings

from .api_stub import StubAPI
from .helpers import FAST, PROMPTS, ratio_reward, two_agents

KEY = "sk-test-5f0c9d7e1b2a4c68"
ENV = "COMLRL_TEST_COMPARATOR_KEY"
SAMPLING = dict(max_new_tokens=8, temperature=1.0, top_p=1.0, top_k=None)


@pytest.fixture
def api(monkeypatch):
    monkeypatch.setenv(ENV, KEY)
    with StubAPI(KEY) as stub:
        yield stub


def _client(url, fmt="openai", **kw):
    settings = ApiSettings(
        url=url, format=fmt, model="stub-model", key_env=ENV, retry_backoff=0.0, timeout=10.0, **kw
    )
    return ApiClient(settings)


def test_openai_format_survives_a_500_and_a_malformed_body(api):
    client = _client(api.url_base + "/v1/chat/completions")
    api.failures = [500, "malformed"]
    texts = client.complete("Write a story.", 3, **SAMPLING)
    assert len(texts) == 3 and all(isinstance(t, str) and t for t in texts)
    assert client.retries == 2 and len(api.requests) == 3
    body = api.requests[-1]
    assert body["messages"] == [{"role": "user", "content": "Write a story."}]
    assert body["n"] == 3 and body["model"] == "stub-model" and body["max_tokens"] == 8
    assert api.headers[-1]["authorization"] == f"Bearer {KEY}"
    assert KEY not in repr(client)


def test_openai_requests_are_capped_by_max_n(api):
    client = _client(api.url_base + "/v1/chat/completions", max_n_per_request=2)
    assert len(client.complete("p", 5, **SAMPLING)) == 5
    assert [r["n"] for r in api.requests] == [2, 2, 1]


def test_anthropic_format_uses_x_api_key(api):
    client = _client(api.url_base + "/v1/messages", fmt="anthropic")
    texts = client.complete("p", 2, **SAMPLING)
    assert len(texts) == 2 and len(api.requests) == 2  # one candidate per request
    headers = api.headers[-1]
    assert headers["x-api-key"] == KEY and headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in headers
    assert api.requests[-1]["messages"][0]["content"] == "p"


def test_generic_and_responses_formats(api):
    generic = _client(api.url_base + "/generate", fmt="generic")
    out = generic.complete("p", 3, agent_idx=1, batch_item={"prompt": "x", "n": 2}, **SAMPLING)
    assert len(out) == 3
    assert api.requests[-1]["agent_idx"] == 1 and api.requests[-1]["batch_item"]["n"] == 2
    responses = _client(api.url_base + "/v1/responses", fmt="openai_responses")
    assert len(responses.complete("p", 2, **SAMPLING)) == 2


def test_errors_are_clear_and_never_show_the_key(api):
    client = _client(api.url_base + "/v1/chat/completions", max_retries=1)
    api.failures = [500, 503]
    with pytest.raises(RuntimeError, match="after 2 attempt") as info:
        client.complete("p", 1, **SAMPLING)
    assert "HTTP 503" in str(info.value) and KEY not in str(info.value)
    api.failures = [402]
    with pytest.raises(RuntimeError, match="402"):
        client.complete("p", 1, **SAMPLING)
    api.failures = [400]
    before = len(api.requests)
    with pytest.raises(ValueError, match="HTTP 400"):
        client.complete("p", 1, **SAMPLING)
    assert len(api.requests) == before + 1  # a client error is not retried
    api.failures = ["malformed", "malformed"]
    with pytest.raises(RuntimeError, match="not JSON"):
        client.complete("p", 1, **SAMPLING)


def test_missing_key_variable_names_the_variable(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    with pytest.raises(ValueError, match=ENV):
        _client("http://127.0.0.1:9/v1/chat/completions")


def _files_under(root):
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            yield os.path.join(dirpath, name)


def test_iterative_api_comparator_keeps_the_key_secret(api, tmp_path, caplog, capsys):
    caplog.set_level(logging.DEBUG)
    agents, tok = two_agents()
    cfg = MADPOIterConfig(
        **FAST,
        num_iterations=2,
        preference_num_candidates=2,
        preference_pairs_per_sample=2,
        comparator_policy="api",
        comparator_api_url=api.url_base + "/v1/chat/completions",
        comparator_api_format="openai",
        comparator_api_model="stub-model",
        comparator_api_key_env=ENV,
        comparator_api_retry_backoff=0.0,
        preference_replay_mode="all_history",
        log_reward_distribution=True,
        output_dir=str(tmp_path / "run"),
    )
    trainer = MADPOIterTrainer(
        agents=agents, tokenizer=tok, train_dataset=PROMPTS[:2], reward_func=ratio_reward, args=cfg
    )
    api.failures = [500, "malformed"]
    trainer.train(checkpoint_dir=str(tmp_path / "ckpt"))
    assert trainer.online.api_client.retries == 2
    assert trainer.prepared_stage == 1 and trainer.updates_seen > 0
    # Comparator text has no sampled ids: it is tokenized once, EOS appended.
    eos = tok.eos_token_id
    comparator_sides = [
        p.loser_ids if p.target_is_winner else p.winner_ids for p in trainer.iteration_pairs
    ]
    assert comparator_sides and all(ids[-1] == eos for side in comparator_sides for ids in side)
    out = capsys.readouterr()
    assert KEY not in out.out + out.err + caplog.text
    scanned = 0
    for path in _files_under(tmp_path):
        with open(path, "rb") as fh:
            assert KEY.encode() not in fh.read(), f"the API key leaked into {path}"
        scanned += 1
    assert scanned > 5
    assert os.path.exists(tmp_path / "ckpt" / "latest")
