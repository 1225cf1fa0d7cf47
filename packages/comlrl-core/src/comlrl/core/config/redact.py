"""Secret redaction for every config that is written to disk or sent to a logger.

A value is replaced by ``REDACTED`` when its key looks like it holds a secret (``api_key``,
``access_token``, ``client_secret``, ``password``, ...), when it sits under a key naming HTTP
headers (``*_headers``: header values carry credentials), or when it is a credential-looking string
(``Bearer ...``). In URLs, the password of ``user:password@host`` and secret-looking query
parameters (``?api_key=...&token=...``) are redacted; the rest of the URL is kept.

Names are split into words (``comparator_api_key`` -> comparator, api, key), so ``max_tokens``,
``tokenizer`` or ``keys`` are not secrets. A name whose last word says it only *points* at a
secret (``comparator_api_key_env``, ``..._key_header``, ``..._key_prefix``, ``..._id``) is kept,
as are the tokenizer's special tokens (``pad_token``, ``eos_token``, ...).
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
from typing import Any

REDACTED = "<redacted>"

_ALWAYS_SECRET = {
    "secret",
    "secrets",
    "password",
    "passwd",
    "passphrase",
    "pwd",
    "credential",
    "credentials",
    "apikey",
    "cookie",
    "cookies",
    "authorization",
    "signature",
    "sig",
}
_SECRET_IF_LAST = {"key", "token"}
# Last words that make a name refer to a secret rather than hold one.
_POINTER_WORDS = {
    "env",
    "var",
    "header",
    "prefix",
    "id",
    "ids",
    "name",
    "names",
    "field",
    "path",
    "file",
    "type",
    "format",
    "length",
    "limit",
    "count",
    "size",
}
_SPECIAL_TOKEN_ROLES = {"pad", "eos", "bos", "unk", "sep", "cls", "mask", "special", "additional"}
_CREDENTIAL_VALUE = re.compile(r"^\s*(bearer|basic|token)\s+[A-Za-z0-9._~+/=:-]{8,}\s*$", re.I)
_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")


def _words(name: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return [w for w in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if w]


def is_secret_name(name: Any) -> bool:
    """Whether a key called ``name`` holds a secret value (see the module docstring)."""
    if not isinstance(name, str):
        return False
    words = _words(name)
    if not words or words[-1] in _POINTER_WORDS:
        return False
    if any(w in _ALWAYS_SECRET for w in words):
        return True
    if words[-1] in _SECRET_IF_LAST:
        return not (len(words) > 1 and words[-2] in _SPECIAL_TOKEN_ROLES)
    return False


def _names_headers(name: Any) -> bool:
    return isinstance(name, str) and _words(name)[-1:] == ["headers"]


def redact_url(url: str) -> str:
    """``url`` without the password of its user info or the values of secret query fields."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return REDACTED  # not parseable: it cannot be shown safely
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}:{REDACTED}@{host}" if ":" in userinfo else f"{REDACTED}@{host}"
    query = parts.query
    pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
    if any(is_secret_name(k) for k, _ in pairs):
        query = "&".join(
            f"{urllib.parse.quote(k, safe='')}="
            + (REDACTED if is_secret_name(k) else urllib.parse.quote(v, safe=""))
            for k, v in pairs
        )
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact_text(text: str) -> str:
    """A string value: credentials in URLs and ``Bearer ...``-style values removed."""
    if _CREDENTIAL_VALUE.match(text):
        return REDACTED
    if _URL.match(text.strip()):
        return redact_url(text.strip())
    return text


def redact(value: Any, name: Any = None) -> Any:
    """A copy of ``value`` (mappings, lists and tuples walked recursively) with every secret
    replaced by :data:`REDACTED`. ``name`` is the key ``value`` sits under, if any."""
    if is_secret_name(name):
        return value if value is None or value == "" else REDACTED
    if _names_headers(name):
        if isinstance(value, Mapping):
            return {k: (REDACTED if v not in (None, "") else v) for k, v in value.items()}
        if isinstance(value, str) and value:
            return REDACTED
    if isinstance(value, Mapping):
        return {k: redact(v, k) for k, v in value.items()}
    if type(value) in (list, tuple):
        return type(value)(redact(v) for v in value)
    if isinstance(value, str):
        return redact_text(value)
    return value


def redacted_paths(value: Any, path: str = "") -> list[str]:
    """Dotted paths of the values that hold :data:`REDACTED` (e.g. in a saved config.yaml)."""
    if isinstance(value, Mapping):
        return [
            p
            for key, item in value.items()
            for p in redacted_paths(item, f"{path}.{key}" if path else str(key))
        ]
    if isinstance(value, (list, tuple)):
        return [p for i, v in enumerate(value) for p in redacted_paths(v, f"{path}[{i}]")]
    return [path] if isinstance(value, str) and REDACTED in value else []
