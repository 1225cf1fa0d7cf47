"""A small HTTP client for API comparators (stdlib ``urllib`` only).

Formats: ``generic`` (one JSON request returns every completion), ``openai`` (chat
completions), ``anthropic`` (messages) and ``openai_responses``. The key is read from the
environment variable the config names; it is sent in a header and nowhere else: not in reprs,
errors, logs or configs. Transient failures (timeouts, connection errors, HTTP 408/425/429/5xx,
bodies that are not the expected JSON) are retried with exponential backoff; after the last
attempt the error says what went wrong.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

RETRY_STATUS = {408, 425, 429}
ANTHROPIC_VERSION = "2023-06-01"
_FALLBACK_FIELDS = ("completions", "responses", "outputs", "choices")
_TEXT_KEYS = ("text", "content", "completion", "response")


class MalformedResponse(ValueError):
    """The endpoint answered, but not with the JSON layout this format expects."""


@dataclass
class ApiSettings:
    """Connection settings (see the ``comparator_api_*`` config fields)."""

    url: str
    format: str = "generic"
    model: str | None = None
    max_n_per_request: int | None = None
    timeout: float = 120.0
    headers: dict[str, str] = field(default_factory=dict)
    key_env: str | None = None
    key_header: str = "Authorization"
    key_prefix: str | None = "Bearer"
    response_field: str = "completions"
    extra_body: dict[str, Any] = field(default_factory=dict)
    max_retries: int = 3
    retry_backoff: float = 1.0

    @classmethod
    def from_config(cls, cfg: Any) -> ApiSettings:
        """Read the ``comparator_api_*`` fields of an iterative config."""
        return cls(
            url=cfg.comparator_api_url,
            format=cfg.comparator_api_format,
            model=cfg.comparator_api_model,
            max_n_per_request=cfg.comparator_api_max_n_per_request,
            timeout=float(cfg.comparator_api_timeout),
            headers=dict(cfg.comparator_api_headers or {}),
            key_env=cfg.comparator_api_key_env,
            key_header=cfg.comparator_api_key_header,
            key_prefix=cfg.comparator_api_key_prefix,
            response_field=cfg.comparator_api_response_field,
            extra_body=dict(cfg.comparator_api_extra_body or {}),
            max_retries=cfg.comparator_api_max_retries,
            retry_backoff=float(cfg.comparator_api_retry_backoff),
        )


def _json_safe(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _dotted(data: Any, path: str) -> Any:
    node = data
    for part in path.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        else:
            return None
    return node


def _item_text(item: Any) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, dict):
        for key in _TEXT_KEYS:
            if isinstance(item.get(key), str):
                return item[key]
        message = item.get("message")
        if isinstance(message, dict) and isinstance(message.get("content"), str):
            return message["content"]
    raise MalformedResponse(f"a completion entry is neither text nor a known object: {item!r:.120}")


class ApiClient:
    """Sends prompts to an endpoint and returns completion texts.

    Args:
        settings: the connection settings.
        opener: ``urlopen``-like callable (tests may pass their own).
        sleep: used between retries.
    """

    def __init__(
        self,
        settings: ApiSettings,
        opener: Callable[..., Any] = urllib.request.urlopen,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.settings = settings
        self._opener = opener
        self._sleep = sleep
        self._key: str | None = None
        if settings.key_env:
            key = os.environ.get(settings.key_env)
            if not key:
                raise ValueError(
                    f"comparator_api_key_env: environment variable {settings.key_env!r} is not "
                    "set or empty; export the API key under that name."
                )
            self._key = key
        self.requests_sent = 0
        self.retries = 0

    def __repr__(self) -> str:
        s = self.settings
        return f"ApiClient(url={s.url!r}, format={s.format!r}, model={s.model!r})"

    # ------------------------------------------------------------------ requests
    def _headers(self) -> dict[str, str]:
        s = self.settings
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        headers.update({str(k): str(v) for k, v in s.headers.items()})
        if s.format == "anthropic":
            headers.setdefault("anthropic-version", ANTHROPIC_VERSION)
            if self._key:
                headers["x-api-key"] = self._key
        elif self._key:
            prefix = f"{s.key_prefix} " if s.key_prefix else ""
            headers[s.key_header] = prefix + self._key
        return headers

    def _scrub(self, text: str) -> str:
        return text.replace(self._key, "<redacted>") if self._key else text

    def _post(self, payload: dict[str, Any], extract: Callable[[Any], list[str]]) -> list[str]:
        s = self.settings
        body = json.dumps(payload).encode("utf-8")
        problem = "no attempt made"
        for attempt in range(s.max_retries + 1):
            if attempt:
                self.retries += 1
                self._sleep(s.retry_backoff * (2 ** (attempt - 1)))
            request = urllib.request.Request(
                s.url, data=body, headers=self._headers(), method="POST"
            )
            self.requests_sent += 1
            try:
                with self._opener(request, timeout=s.timeout) as response:
                    raw = response.read()
            except urllib.error.HTTPError as exc:
                detail = self._scrub(exc.read().decode("utf-8", "replace")[:300])
                if exc.code == 402:
                    raise RuntimeError(
                        f"comparator API {s.url} answered HTTP 402 (payment required / "
                        f"insufficient balance): {detail}"
                    ) from None
                if exc.code in RETRY_STATUS or exc.code >= 500:
                    problem = f"HTTP {exc.code}: {detail}"
                    continue
                raise ValueError(
                    f"comparator API {s.url} rejected the request with HTTP {exc.code}: {detail}"
                ) from None
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
                problem = f"{type(exc).__name__}: {self._scrub(str(exc))}"
                continue
            try:
                data = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError):
                problem = (
                    f"response is not JSON: {self._scrub(raw[:200].decode('utf-8', 'replace'))!r}"
                )
                continue
            try:
                texts = extract(data)
            except MalformedResponse as exc:
                problem = self._scrub(str(exc))
                continue
            return texts
        raise RuntimeError(
            f"comparator API {s.url} ({s.format}) failed after {s.max_retries + 1} attempt(s); "
            f"last problem: {problem}"
        )

    # ------------------------------------------------------------------ formats
    def complete(
        self,
        prompt: str,
        n: int,
        *,
        max_new_tokens: int,
        temperature: float,
        top_p: float,
        top_k: int | None,
        agent_idx: int = 0,
        batch_item: Any = None,
    ) -> list[str]:
        """``n`` completions of ``prompt``."""
        fmt = self.settings.format
        if fmt == "generic":
            return self._generic(
                prompt, n, max_new_tokens, temperature, top_p, top_k, agent_idx, batch_item
            )
        out: list[str] = []
        while len(out) < n:
            want = n - len(out)
            if fmt == "openai":
                got = self._openai(
                    prompt, self._per_request(want), max_new_tokens, temperature, top_p
                )
            elif fmt == "anthropic":
                got = self._anthropic(prompt, max_new_tokens, temperature)
            else:
                got = self._responses(prompt, max_new_tokens)
            if not got:
                raise RuntimeError(f"comparator API {self.settings.url} returned no completions.")
            out.extend(got)
        return out[:n]

    def _per_request(self, want: int) -> int:
        s = self.settings
        deepseek = "deepseek" in s.url.lower() or (s.model or "").lower().startswith("deepseek")
        if deepseek:
            return 1  # DeepSeek's chat endpoint rejects n > 1
        return min(want, s.max_n_per_request) if s.max_n_per_request else want

    def _with_extra(self, payload: dict[str, Any]) -> dict[str, Any]:
        payload.update(self.settings.extra_body)
        return {k: v for k, v in payload.items() if v is not None}

    def _generic(self, prompt, n, max_new_tokens, temperature, top_p, top_k, agent_idx, item):
        s = self.settings
        payload = self._with_extra(
            {
                "prompt": prompt,
                "agent_idx": agent_idx,
                "num_return_sequences": n,
                "max_new_tokens": max_new_tokens,
                "temperature": temperature,
                "top_p": top_p,
                "top_k": top_k,
                "batch_item": _json_safe(item),
                "model": s.model,
            }
        )

        def extract(data):
            entries = _dotted(data, s.response_field)
            if entries is None and isinstance(data, dict):
                entries = next((data[k] for k in _FALLBACK_FIELDS if k in data), None)
            if isinstance(entries, str):
                entries = [entries]
            if not isinstance(entries, list) or not entries:
                raise MalformedResponse(
                    f"no completion list under {s.response_field!r} (or completions, responses, "
                    "outputs, choices)."
                )
            return [_item_text(e) for e in entries]

        return self._post(payload, extract)[:n]

    def _openai(self, prompt, n, max_new_tokens, temperature, top_p):
        payload = self._with_extra(
            {
                "model": self.settings.model,
                "messages": [{"role": "user", "content": prompt}],
                "n": n,
                "max_tokens": max_new_tokens,
                "temperature": temperature,
                "top_p": top_p,
            }
        )

        def extract(data):
            choices = data.get("choices") if isinstance(data, dict) else None
            if not isinstance(choices, list) or not choices:
                raise MalformedResponse(
                    "an OpenAI-style response needs a non-empty 'choices' list."
                )
            out = []
            for choice in choices:
                message = choice.get("message") if isinstance(choice, dict) else None
                if isinstance(message, dict) and isinstance(message.get("content"), str):
                    out.append(message["content"])
                elif isinstance(choice, dict) and isinstance(choice.get("text"), str):
                    out.append(choice["text"])
                else:
                    raise MalformedResponse(f"a choice has no message content: {choice!r:.120}")
            return out

        return self._post(payload, extract)

    def _anthropic(self, prompt, max_new_tokens, temperature):
        payload = self._with_extra(
            {
                "model": self.settings.model,
                "max_tokens": max_new_tokens,
                "messages": [{"role": "user", "content": prompt}],
                "temperature": temperature,
            }
        )

        def extract(data):
            blocks = data.get("content") if isinstance(data, dict) else None
            if not isinstance(blocks, list):
                raise MalformedResponse("an Anthropic-style response needs a 'content' list.")
            texts = [
                b["text"]
                for b in blocks
                if isinstance(b, dict)
                and b.get("type") == "text"
                and isinstance(b.get("text"), str)
            ]
            if not texts:
                raise MalformedResponse("an Anthropic-style response has no text block.")
            return ["".join(texts)]

        return self._post(payload, extract)

    def _responses(self, prompt, max_new_tokens):
        payload = self._with_extra(
            {"model": self.settings.model, "input": prompt, "max_output_tokens": max_new_tokens}
        )

        def extract(data):
            output = data.get("output") if isinstance(data, dict) else None
            if not isinstance(output, list):
                raise MalformedResponse("a Responses-style answer needs an 'output' list.")
            texts = []
            for entry in output:
                for block in (entry.get("content") or []) if isinstance(entry, dict) else []:
                    if isinstance(block, dict) and block.get("type") in ("output_text", "text"):
                        texts.append(str(block.get("text", "")))
            if not texts:
                raise MalformedResponse("a Responses-style answer has no output_text block.")
            return ["".join(texts)]

        return self._post(payload, extract)
