"""Bounds on what a verdict carries back to the trainer (stdlib only; judge and parent both).

Every string the generated code can influence (exception names and messages, above all) ends
up in the result and then in feedback prompts, so each one is cut to a per-field length and
made valid UTF-8 (a lone surrogate becomes ``\\ud800`` text, which a tokenizer accepts), and
the whole verdict is kept under :data:`MAX_VERDICT` bytes.
"""

import json

MAX_VERDICT = 1_000_000
# Per-field lengths, in characters; any other string gets DEFAULT_LIMIT.
LIMITS = {
    "name": 200,
    "error_type": 100,
    "setup_error_type": 100,
    "message": 500,
    "setup_error": 1000,
    "close_error": 100,
}
DEFAULT_LIMIT = 1000
_ELLIPSIS = "..."


def text(value, limit=DEFAULT_LIMIT):
    """``value`` as a str of at most ``limit`` characters that encodes as UTF-8."""
    if type(value) is not str:
        value = "" if value is None else f"<{type(value).__name__}>"
    if len(value) > limit:
        value = value[: max(0, limit - len(_ELLIPSIS))] + _ELLIPSIS
    value = value.encode("utf-8", "backslashreplace").decode("utf-8")
    # Escaping can lengthen the text; cut again (no surrogate is left to split).
    return value if len(value) <= limit else value[: limit - len(_ELLIPSIS)] + _ELLIPSIS


def clean(value, key=None, depth=0):
    """A copy of a verdict (plain JSON data) with every string bounded and valid UTF-8.

    Keys are bounded too; anything that is not JSON data becomes a short placeholder string.
    """
    if depth > 8:
        return None
    if type(value) is dict:
        return {
            text(k, DEFAULT_LIMIT): clean(v, k if type(k) is str else None, depth + 1)
            for k, v in value.items()
        }
    if type(value) is list:
        return [clean(v, key, depth + 1) for v in value]
    if value is None or type(value) in (bool, int, float):
        return value
    return text(value, LIMITS.get(key, DEFAULT_LIMIT))


def encode(report):
    """The verdict as bytes of at most :data:`MAX_VERDICT`: messages go first when it is over,
    then the test list (the result is then a judge error)."""
    report = clean(report)
    data = json.dumps(report).encode("utf-8")
    if len(data) > MAX_VERDICT and type(report.get("tests")) is list:
        for test in report["tests"]:
            if type(test) is dict:
                test["message"] = ""
        data = json.dumps(report).encode("utf-8")
    if len(data) > MAX_VERDICT:
        report = {
            "status": "crashed",
            "fault": "judge_error",
            "setup_error": f"the verdict was over {MAX_VERDICT} bytes",
            "layers": report.get("layers", {}),
        }
        data = json.dumps(report).encode("utf-8")
    return data
