"""The flat tool-use reward (range [-0.4, 1.1]).

total = 0.05 parse + 0.25 name-F1 + 0.35 argument match + 0.10 count + 0.15 balance
        + 0.20 exact bonus - 0.20 overlap - 0.15 lazy - 0.05 extra
parse: share of agents whose output parsed. The agents' calls are merged (a call made by several
agents counts once). name-F1: function names of the merged calls vs. the gold calls. argument
match: gold calls greedily paired with same-name predictions; each pair scores its share of
matching arguments, summed over max(#gold, #predicted). count: 1 - |#pred - #gold| / max.
balance: 1 when the agents' call counts differ by no more than an even split allows. exact:
every gold call matched perfectly and nothing extra. overlap: share of merged calls made by
more than one agent. lazy: share of agents that made no call although there was work for them.
extra: unmatched predictions per gold call, capped at 1.
"""

from __future__ import annotations

from collections import Counter

from comlrl.tasks.tool_use.calls import OPTIONAL, Call, parse_calls, values_match

WEIGHTS = {
    "parse": 0.05,
    "name_f1": 0.25,
    "arguments": 0.35,
    "count": 0.10,
    "balance": 0.15,
    "exact": 0.20,
}
PENALTIES = {"overlap": 0.20, "lazy": 0.15, "extra": 0.05}
TOOL_RANGE = (-0.4, 1.1)  # -(sum of PENALTIES), sum of WEIGHTS


def pair_score(predicted: Call, gold: dict) -> float:
    """Share of the gold call's arguments the prediction gets right (extra arguments count
    against it; an argument with "" among its options may be left out)."""
    got = predicted.args
    wanted = gold["arguments"]
    matched = 0
    for key, options in wanted.items():
        if key in got:
            matched += values_match(got[key], options)
        else:
            matched += OPTIONAL in options
    extra = sum(1 for key in got if key not in wanted)
    denominator = len(wanted) + extra
    return 1.0 if denominator == 0 else matched / denominator


def match_calls(predicted: list[Call], gold: list[dict]) -> tuple[float, int, bool]:
    """Greedy gold-to-prediction pairing: (sum of pair scores, matched count, all perfect)."""
    free = list(range(len(predicted)))
    total, matched, perfect = 0.0, 0, True
    for want in gold:
        best, best_score = None, -1.0
        for index in free:
            if predicted[index].name == want["name"]:
                score = pair_score(predicted[index], want)
                if score > best_score:
                    best, best_score = index, score
        if best is None:
            perfect = False
            continue
        free.remove(best)
        total += best_score
        matched += 1
        perfect = perfect and best_score == 1.0
    return total, matched, perfect


def name_f1(predicted: list[Call], gold: list[dict]) -> float:
    """F1 of the function-name multisets."""
    if not predicted or not gold:
        return 1.0 if not predicted and not gold else 0.0
    want = Counter(g["name"] for g in gold)
    got = Counter(c.name for c in predicted)
    hits = sum(min(got[n], want[n]) for n in got)
    if hits == 0:
        return 0.0
    precision, recall = hits / len(predicted), hits / len(gold)
    return 2 * precision * recall / (precision + recall)


def balance_score(per_agent: list[int], gold_count: int) -> float:
    """1 when the spread of per-agent call counts is as small as the gold count allows."""
    if sum(per_agent) == 0:
        return 0.0
    allowed = 0 if gold_count % len(per_agent) == 0 else 1
    spread = max(per_agent) - min(per_agent)
    if spread <= allowed:
        return 1.0
    return max(0.0, 1.0 - (spread - allowed) / max(1, gold_count))


def score_sample(texts: list[str], item: dict) -> dict[str, float]:
    """Breakdown of one joint sample; ``total`` is the (unclamped) reward."""
    gold = item["ground_truth"]
    schemas = {
        f["name"]: list((f.get("parameters") or {}).get("properties", {}))
        for f in item["functions"]
        if isinstance(f, dict) and "name" in f
    }
    parsed = [parse_calls(t, schemas) for t in texts]
    agents = len(texts)
    owners: dict[str, set[int]] = {}
    merged: list[Call] = []
    for agent, calls in enumerate(parsed):
        for call in calls or []:
            key = call.key()
            if key not in owners:
                owners[key] = set()
                merged.append(call)
            owners[key].add(agent)
    per_agent = [len({c.key() for c in calls or []}) for calls in parsed]
    pair_total, matched, perfect = match_calls(merged, gold)
    n_pred, n_gold = len(merged), len(gold)
    out = {
        "parse": sum(p is not None for p in parsed) / agents,
        "name_f1": name_f1(merged, gold),
        "arguments": pair_total / max(1, n_pred, n_gold),
        "count": 1.0 - abs(n_pred - n_gold) / max(1, n_pred, n_gold),
        "balance": balance_score(per_agent, n_gold),
        "exact": float(perfect and matched == n_gold == n_pred),
        "overlap": sum(1 for o in owners.values() if len(o) > 1) / max(1, n_pred),
        "lazy": max(0, sum(1 for c in per_agent if c == 0) - max(0, agents - n_gold)) / agents,
        "extra": min(1.0, (n_pred - matched) / max(1, n_gold)),
    }
    total = sum(WEIGHTS[k] * out[k] for k in WEIGHTS) - sum(
        PENALTIES[k] * out[k] for k in PENALTIES
    )
    out["calls_predicted"], out["calls_gold"] = float(n_pred), float(n_gold)
    out["total"] = total
    return out


def tool_scorer(columns: list[list[str]], items: list[dict]) -> list[dict[str, float]]:
    """Batch scorer: one breakdown per joint sample."""
    return [score_sample([col[j] for col in columns], item) for j, item in enumerate(items)]
