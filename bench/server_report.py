"""Rows and results.md of a server benchmark run (bench/server_bench.py) from its raw records: the
per-request send and token-chunk times each round keeps (rounds.json.gz). `server_bench.py --report DIR`
recomputes a run's rows with it."""

import gzip
import itertools
import json
import statistics
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROUNDS = "rounds.json.gz"
SLOTS = 16  # each server's slots (server_bench.py starts both with this many)


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    k = (len(values) - 1) * q / 100
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


STALL_S = 0.25  # a gap this long between two tokens of one stream counts as a stall


def summarize(rounds: list[dict]) -> dict:
    """One row from its rounds (records as relative() writes them, window [0, length]): tokens that arrived
    inside the windows over the windows' length; latencies pooled over the requests sent inside them."""
    tokens = window = cpu = 0.0
    gaps, ttfts, e2e, chunks, counted, errors = [], [], [], 0, [], []
    for rnd in rounds:
        length = rnd["window"][1]
        window += length
        cpu += rnd["server_cpu_s"]
        for r in rnd["requests"]:
            inside = 0 <= r["sent"] < length
            if "error" in r:
                errors += [r["error"]] if inside else []
                continue
            offsets = r["chunk_times"]
            per_chunk = r["tokens"] / len(offsets)  # > 1 where the server held bytes of a character back
            tokens += per_chunk * sum(0 <= r["sent"] + t < length for t in offsets)
            if inside:
                counted.append(r)
                chunks += len(offsets)
                ttfts.append(offsets[0])
                e2e.append(offsets[-1])
                gaps += [b - a for a, b in itertools.pairwise(offsets)]
    completion = sum(r["tokens"] for r in counted)
    ms = lambda v: None if v is None else v * 1000.0  # noqa: E731
    return {
        "tokens_per_s": tokens / window,
        "itl_p50_ms": ms(percentile(gaps, 50)),
        "itl_p99_ms": ms(percentile(gaps, 99)),
        "ttft_p50_ms": ms(percentile(ttfts, 50)),
        "ttft_p99_ms": ms(percentile(ttfts, 99)),
        "e2e_p50_ms": ms(percentile(e2e, 50)),
        "stalls": sum(g >= STALL_S for g in gaps),
        "stalled_s": sum(g for g in gaps if g >= STALL_S),
        "requests": len(counted),
        "errors": len(errors),
        "error_samples": sorted(set(errors))[:3],
        "completion_tokens": completion,
        "resent": sum(bool(r.get("resent")) for r in counted),
        "tokens_per_chunk": completion / chunks if chunks else None,
        "window_s": window,
        "server_cpu_s": cpu,
        "tokens_per_cpu_s": tokens / cpu if cpu else None,
    }


def rows(result: dict) -> list[dict]:
    out = []
    for name in result["config"]["servers"]:
        for c in result["config"]["concurrency"]:
            rounds = [r for r in result["rounds"] if r["server"] == name and r["concurrency"] == c]
            if rounds:
                row = {"server": name, "concurrency": c, **summarize(rounds)}
                out.append(row | {"loadavg": statistics.fmean(r["loadavg"] for r in rounds)})
    return out


def prefix_rows(result: dict) -> list[dict]:
    """Per server: the median TTFT of its shared-prefix trials, cold and warm (every round pooled)."""
    out = []
    for name in result["config"]["servers"]:
        trials = [t for p in result.get("prefix", ()) if p["server"] == name for t in p["trials"]]
        cold = [t["cold_ttft_s"] * 1000.0 for t in trials if "cold_ttft_s" in t]
        warm = [t["warm_ttft_s"] * 1000.0 for t in trials if "warm_ttft_s" in t]
        if trials:
            errors = sum("cold_error" in t or "warm_error" in t for t in trials)
            out.append({"server": name, "trials": len(trials), "errors": errors, "cold_p50_ms": percentile(cold, 50),
                        "warm_p50_ms": percentile(warm, 50), "cold_ms": cold, "warm_ms": warm})  # fmt: skip
    return out


def ratio(a, b):
    return a / b if a and b else None


def write_markdown(out: Path, result: dict) -> None:
    cfg, rows = result["config"], result["rows"]
    by = {(r["server"], r["concurrency"]): r for r in rows}
    lines = [
        f"# Server throughput, {result['machine']['date']}",
        "",
        f"{result['machine']['cpu']}, {result['machine']['cores']} cores (shared: load average "
        f"{result['machine']['loadavg_start'][0]:.1f} at the start, {result['machine']['loadavg_end'][0]:.1f} at "
        f"the end); commit {result['machine']['commit']}. GPT-2 124M bf16, same weights; `--threads "
        f"{cfg['threads']}` for both servers, {SLOTS} slots; streaming `POST /v1/completions`, "
        f"{cfg['max_tokens']} tokens, greedy, `ignore_eos`; {cfg['warmup']} s warm-up + {cfg['duration']} s "
        f"measured per row, {cfg['rounds']} round(s)"
        + (
            f"; every server's session at autogroup nice {cfg['autogroup_nice']}." if cfg.get("autogroup_nice") else "."
        ),
        "",
        "| server | clients | tokens/s | per-token p50 / p99 ms | TTFT p50 / p99 ms | requests | errors | "
        f"gaps ≥ {STALL_S * 1000:.0f} ms (s, all streams) | server CPU s | tokens per CPU s | load avg |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    f1 = lambda v: "–" if v is None else f"{v:.1f}"  # noqa: E731
    for r in rows:
        lines.append(
            f"| {r['server']} | {r['concurrency']} | {f1(r['tokens_per_s'])} | {f1(r['itl_p50_ms'])} / "
            f"{f1(r['itl_p99_ms'])} | {f1(r['ttft_p50_ms'])} / {f1(r['ttft_p99_ms'])} | {r['requests']} | "
            f"{r['errors']} | {r['stalls']} ({r['stalled_s']:.1f}) | "
            f"{f1(r['server_cpu_s'])} | {f1(r['tokens_per_cpu_s'])} | {f1(r['loadavg'])} |"
        )
    top, one = max(cfg["concurrency"]), min(cfg["concurrency"])
    lines += ["", "| ratio | tokens/s | target |", "|---|---|---|"]
    targets = {"ours": "≥ 3.5×", "ours/llama": "≥ 1.2×"}
    for name in ("ours", "llama"):
        x = ratio(by.get((name, top), {}).get("tokens_per_s"), by.get((name, one), {}).get("tokens_per_s"))
        if x is not None:
            lines.append(f"| {name}@{top} / {name}@{one} | {x:.2f}× | {targets.get(name, '')} |")
    for c, target in ((one, "≥ 1.1×"), (top, targets["ours/llama"])):
        x = ratio(by.get(("ours", c), {}).get("tokens_per_s"), by.get(("llama", c), {}).get("tokens_per_s"))
        if x is not None:
            lines.append(f"| ours@{c} / llama@{c} | {x:.2f}× | {target} |")
    steps = [ms for r in result.get("runtime", ()) for ms in r["decode_ms_per_token"][1:]]  # the first warms up
    one_client = by.get(("ours", one), {}).get("itl_p50_ms")
    if steps and one_client:
        step = statistics.median(steps)
        lines.append(
            f"\nOne client against the runtime's own step: ours@{one} per-token p50 {one_client:.2f} ms, "
            f"runtime_bench's batch-1 decode step on the same artifact and threads {step:.2f} ms (median of "
            f"{len(steps)} repetitions of {cfg['max_tokens']} steps) = {one_client / step:.3f}× (target ≤ 1.05×)."
        )
    prefix = result.get("prefix_rows") or []
    if prefix:
        tokens = result["config"].get("prefix_tokens", 900)
        lines += [
            "",
            f"Time to first token with a shared {tokens}-token prefix (one token asked; the prefix first cold, then "
            "warm with another suffix; medians over the trials):",
            "",
            "| server | trials | errors | TTFT cold ms | TTFT warm ms | cold / warm |",
            "|---|---|---|---|---|---|",
        ]
        for r in prefix:
            x = ratio(r["cold_p50_ms"], r["warm_p50_ms"])
            lines.append(f"| {r['server']} | {r['trials']} | {r['errors']} | {f1(r['cold_p50_ms'])} | "
                         f"{f1(r['warm_p50_ms'])} | {'–' if x is None else f'{x:.1f}×'} |")  # fmt: skip
        by_prefix = {r["server"]: r for r in prefix}
        if "ours" in by_prefix and "llama" in by_prefix:
            x = ratio(by_prefix["llama"]["warm_p50_ms"], by_prefix["ours"]["warm_p50_ms"])
            if x is not None:
                lines.append(f"\nWarm TTFT, llama / ours: {x:.2f}× (target: ours ≤ llama's, i.e. ≥ 1.0×).")
    per_chunk = ", ".join(f"{r['server']}@{r['concurrency']} {r['tokens_per_chunk'] or 0:.3f}" for r in rows)
    lines.append(f"\nTokens per token chunk (> 1: bytes of a character held back): {per_chunk}.")
    for r in rows:
        if r["errors"]:
            lines.append(
                f"\nErrors, {r['server']}@{r['concurrency']}: {r['errors']}, e.g. {'; '.join(r['error_samples'])}."
            )
    resent = ", ".join(f"{r['server']}@{r['concurrency']} {r['resent']}/{r['requests']}" for r in rows if r["resent"])
    if resent:
        lines.append(
            f"\nRequests that found their kept-alive connection closed by the server and were sent again on a "
            f"new one (not errors): {resent}."
        )
    lines += ["", "Same weights (greedy, the reference prompt, against PyTorch fp32 on the bf16 weights):", ""]
    for name, c in result["check"].items():
        verdict = "same text" if c["same_text"] else f"differs after {c['chars_agreeing']} characters"
        lines.append(
            f"- {name}: {verdict}; prompt {c['prompt_tokens']} tokens (reference {c['reference_prompt_tokens']})"
            + (f"; error: {c['error']}" if c.get("error") else "")
        )
    lines += ["", "Commands (`--port` picked free at each start):", ""]
    lines += [f"- {n}: `{' '.join(cmd).replace(str(ROOT) + '/', '')}`" for n, cmd in result["commands"].items()]
    lines += ["", "Versions:", ""] + [f"- {n}: {v}" for n, v in result["versions"].items()]
    (out / "results.md").write_text("\n".join(lines) + "\n")


def write_results(out: Path, result: dict) -> None:
    """rows from the rounds, then results.json (all but the rounds), rounds.json.gz and results.md."""
    result["rows"] = rows(result)
    result["prefix_rows"] = prefix_rows(result)
    (out / "results.json").write_text(json.dumps({k: v for k, v in result.items() if k != "rounds"}, indent=1))
    rounds = json.dumps(result["rounds"], separators=(",", ":")).encode()
    (out / ROUNDS).write_bytes(gzip.compress(rounds, mtime=0))
    write_markdown(out, result)
