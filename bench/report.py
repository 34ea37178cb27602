"""results.json → results.md (tables in the seed's columns, ratios to our runtime) and PNG charts."""

import json
import sys
from pathlib import Path

RUNTIME = "gpt-aot runtime"


def _fmt(v, spec: str = ".1f") -> str:
    return "—" if v is None else format(v, spec)


def _ratio(ours: float | None, theirs: float | None) -> str:
    """How many times faster our runtime is than a peer (time_peer / time_ours)."""
    return "—" if not ours or not theirs else f"{theirs / ours:.2f}×"


def training_table(rows: list[dict]) -> list[str]:
    lines = [
        "| attention | implementation | compile s | 1st iter ms | avg ms/iter | median excl. 1st [min–max] | tokens/s "
        "| MFU | peak RSS MiB | peak GPU MiB | final loss | runtime speed-up |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    ours = {r["attention"]: r.get("median_ms") for r in rows if r["impl"] == RUNTIME}
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['attention']} | {r['impl']} | failed: {r['error'][:80]} |" + " |" * 9)
            continue
        compile_s = r["compile_s"] if r["impl"] == RUNTIME else (r["first_ms"] - r["median_ms"]) / 1e3
        gpu = r.get("peak_device_bytes")
        used = r.get("trained_with", r["attention"])
        attention = r["attention"] if used == r["attention"] else f"{r['attention']} (trains with {used}¹)"
        lines.append(
            f"| {attention} | {r['impl']} | {_fmt(compile_s)} | {_fmt(r['first_ms'])} | {_fmt(r['avg_ms'])} "
            f"| {_fmt(r['median_ms'])} [{_fmt(r['min_ms'])}–{_fmt(r['max_ms'])}] | {_fmt(r['tokens_per_s'], '.0f')} "
            f"| {_fmt(100 * r['mfu'])}% | {_fmt(r['peak_rss_mib'], '.0f')} | {_fmt(gpu and gpu / 2**20, '.0f')} "
            f"| {r['loss'][-1]:.3f} | {_ratio(ours.get(r['attention']), r['median_ms'])} |"
        )
    return lines


def inference_table(rows: list[dict]) -> list[str]:
    lines = [
        "| model | dtype | batch | context | implementation | prefill tokens/s | decode ms/step [min–max] "
        "| decode tokens/s | roofline | runtime speed-up (decode) | same tokens as runtime | peak RSS MiB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def key(r):  # results from before the dtype and batch columns were fp32 at batch 1
        return r["model"], r.get("dtype", "fp32"), r.get("batch", 1), r["context"]

    ours = {key(r): r for r in rows if r["impl"] == RUNTIME and "decode_ms" in r}
    for r in rows:
        model, dtype, batch, context = key(r)
        head = f"| {model} | {dtype} | {batch} | {context} | {r['impl']} "
        if "error" in r:
            lines.append(head + f"| failed: {r['error'][:80]} |" + " |" * 6)
            continue
        mine = ours.get(key(r), {})
        same = "—" if not mine else ("yes" if mine.get("tokens") == r["tokens"] else "no")
        roofline = r.get("roofline_fraction")
        lines.append(
            head + f"| {_fmt(r['prefill_tokens_per_s'], '.0f')} "
            f"| {_fmt(r['decode_ms'], '.2f')} [{_fmt(r['decode_min_ms'], '.2f')}–{_fmt(r['decode_max_ms'], '.2f')}] "
            f"| {_fmt(r.get('decode_tokens_per_s'), '.0f')} | {_fmt(roofline and 100 * roofline, '.0f')}% "
            f"| {_ratio(mine.get('decode_ms'), r['decode_ms'])} | {same} | {_fmt(r['peak_rss_mib'], '.0f')} |"
        )
    return lines


def charts(results: dict, out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    for key, label, value, name in (
        ("training", lambda r: f"{r['attention']}\n{r['impl']}", "median_ms", "training_ms_per_iter.png"),
        (
            "inference",
            lambda r: f"{r['model']} {r.get('dtype', 'fp32')}\nb{r.get('batch', 1)} ctx {r['context']}\n{r['impl']}",
            "decode_ms",
            "decode_ms_per_token.png",
        ),
    ):
        rows = [r for r in results.get(key, []) if value in r]
        if not rows:
            continue
        fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(rows)), 4))
        colors = ["tab:green" if r["impl"] == RUNTIME else "tab:gray" for r in rows]
        ax.bar(range(len(rows)), [r[value] for r in rows], color=colors)
        ax.set_xticks(range(len(rows)), [label(r) for r in rows], fontsize=7)
        ax.set_ylabel(value.replace("_", " "))
        m = results["machine"]
        ax.set_title(f"{key} — {m['gpu'] or m['cpu']}, torch {m['torch']}", fontsize=9)
        fig.tight_layout()
        fig.savefig(out / name, dpi=120)
        plt.close(fig)
        made.append(name)
    return made


def write(results: dict, out: Path) -> None:
    m = results["machine"]
    lines = [
        f"# Benchmarks — {m['gpu'] or m['cpu']} ({m['device']}), {m['date']}",
        "",
        f"torch {m['torch']} (CUDA {m['cuda']}), {m['threads']} threads, commit {m['commit']}. "
        f"Measured matmul peak {results['matmul_peak_flops'] / 1e9:.0f} GFLOP/s (the MFU denominator).",
    ]
    if results.get("scaled"):
        lines.append(
            "**Scaled config**: no GPU here, so training uses a smaller model and fewer iterations than the "
            "seed (see `config` in results.json); ratios are meaningful, absolute times are not GPU times."
        )
    if "training" in results:
        c = results["config"]["train"]
        lines += ["", f"## Training ({c['model']}, batch {c['batch']} × {c['seq']}, accum {c['accum']})", ""]
        lines += training_table(results["training"])
    if "inference" in results:
        lines += ["", "## Inference (greedy; context = prompt + generated tokens)", ""]
        lines += inference_table(results["inference"])
        picks = {(r["model"], r.get("dtype", "fp32")): r for r in results["inference"] if "decode_attention" in r}
        if picks:
            lines += ["", "Attention kernels, as the artifact's compile measured and picked them; every row uses them:"]
            lines += [
                f"{model} {dtype}: prefill {r['attention']}, decode {r['decode_attention']}"
                + (
                    f"; the runtime runs its linears as {r['linears']['decode']} (prefill, decode of many rows), "
                    f"{r['linears']['decode_one']} (decode of one row)."
                    if "linears" in r
                    else "."
                )
                for (model, dtype), r in picks.items()
            ]
        if "read_bandwidth" in results:
            lines += [
                "",
                "A decode step reads every weight and each sequence's KV cache up to its position; at the measured "
                f"read bandwidth ({results['read_bandwidth'] / 1e9:.1f} GB/s, the best of a sum and a matrix-vector "
                "product over a tensor far larger than the caches) that takes the row's "
                "`roofline_ms` (results.json) at the least. Roofline = that floor / the row's decode time: "
                "100% is as fast as memory allows, for every implementation alike.",
            ]
    lines += ["", "Speed-up = peer's median time / runtime's median time (> 1: the runtime is faster)."]
    if any(r.get("trained_with", r["attention"]) != r["attention"] for r in results.get("training", [])):
        lines.append(
            "¹ compile checks each compiled backward against eager autograd and refused this kernel's "
            "(its gradients differ), so the train step uses the kernel named; the manifest records why."
        )
    for name in charts(results, out):
        lines += ["", f"![{name}]({name})"]
    (out / "results.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    directory = Path(sys.argv[1])
    write(json.loads((directory / "results.json").read_text()), directory)
