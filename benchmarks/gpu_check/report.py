"""The GPU check's numbers: per-workload rates and ratios, and the tables printed at the end."""

from __future__ import annotations

from benchmarks.runner import ratios, summarize

SIDE_ORDER = ("ours", "reference", "bare")


def summarize_workload(name: str, size: str, sides: dict, clock: str) -> dict:
    """Rates of every side that produced a result, and the ratios between them."""
    done = {s: summarize([r], clock) for s, r in sides.items() if "env_steps" in r}
    for summary in done.values():
        summary.pop("runs")
    out = ratios(name, size, done)
    if "speedup_env_steps" in out:
        out["ahead_of_reference"] = out["speedup_env_steps"] > 1.0
    return {"rates": done, "ratios": out}


def _rate(rates: dict, side: str, key: str) -> str:
    return f"{rates[side][key]:.1f}" if side in rates else "–"


def _memory(rates: dict, side: str) -> str:
    if side not in rates:
        return "–"
    value = rates[side].get("peak_gpu_mib", rates[side]["peak_rss_mib"])
    return f"{value:.0f}"


def _side_state(workload: dict, side: str) -> str:
    """What a side's missing number means: skipped, failed or cut by the budget."""
    result = workload["sides"].get(side)
    if result is None:
        return "–"
    return result.get("status", "–") if "env_steps" not in result else "ok"


def workload_table(record: dict) -> str:
    """Markdown table of every workload: rates, ratios and peak memory per side."""
    on_gpu = record["device"].startswith("cuda")
    memory = "peak GPU MiB" if on_gpu else "peak RSS MiB"
    head = (
        f"| workload | env-steps/s ours / ref / bare | tokens/s ours / ref / bare | "
        f"speed-up env-steps | speed-up tokens | overhead ratio | {memory} ours / ref / bare |\n"
        "|---|---|---|---|---|---|---|\n"
    )
    rows = []
    for name, w in record["workloads"].items():
        rates, r = w.get("rates", {}), w.get("ratios", {})
        steps = " / ".join(_rate(rates, s, "env_steps_per_s") for s in SIDE_ORDER)
        tokens = " / ".join(_rate(rates, s, "tokens_per_s") for s in SIDE_ORDER)
        mem = " / ".join(_memory(rates, s) for s in SIDE_ORDER)
        speed = f"{r['speedup_env_steps']:.2f}x" if "speedup_env_steps" in r else "–"
        speed_t = f"{r['speedup_tokens']:.2f}x" if "speedup_tokens" in r else "–"
        over = f"{r['overhead_ratio']:.2f}" if "overhead_ratio" in r else "–"
        rows.append(f"| {name} | {steps} | {tokens} | {speed} | {speed_t} | {over} | {mem} |")
    return head + "\n".join(rows) + "\n"


def problems_table(record: dict) -> str:
    """Lines for every side that did not produce a number, with why."""
    lines = []
    for name, w in record["workloads"].items():
        for side, result in w["sides"].items():
            if "env_steps" not in result:
                reason = (result.get("reason") or "").strip().splitlines()
                lines.append(
                    f"- {name} / {side}: {result.get('status')}: {reason[-1] if reason else ''}"
                )
    return "\n".join(lines) + ("\n" if lines else "")


def _details(detail: dict) -> str:
    """The scalar details of a check, short: ``key=value`` pairs."""
    parts = []
    for key, value in detail.items():
        if isinstance(value, float):
            parts.append(f"{key}={value:.3g}")
        elif isinstance(value, (int, str, bool)):
            parts.append(f"{key}={value}")
    return ", ".join(parts)


def checks_table(record: dict) -> str:
    """Markdown table of the path checks: status, the reason when not passed, the details."""
    head = "| check | status | reason | details |\n|---|---|---|---|\n"
    rows = []
    for name, c in record["checks"].items():
        reason = (c.get("reason") or "").strip().splitlines()
        detail = _details(c.get("detail") or {})
        rows.append(f"| {name} | {c['status']} | {reason[-1] if reason else ''} | {detail} |")
    return head + "\n".join(rows) + "\n"


def verdict(record: dict) -> tuple[bool, list[str]]:
    """Whether everything that should run ran and passed, and what did not."""
    bad = []
    for name, w in record["workloads"].items():
        for side, result in w["sides"].items():
            if "env_steps" not in result and result.get("status") != "skipped":
                bad.append(f"{name}/{side} {result.get('status')}")
    for name, c in record["checks"].items():
        if c["status"] not in ("passed", "not_applicable"):
            bad.append(f"check {name} {c['status']}")
    for name, c in record.get("vllm", {}).items():
        if c["status"] not in ("passed", "not_applicable"):
            bad.append(f"vllm {name} {c['status']}")
    return not bad, bad
