"""Decode with int8 and int4 weights, side by side (issue #27): our int8, int4 and bf16 artifacts, llama.cpp's
Q8_0, Q4_0, Q4_1, Q4_K_M (and bf16) and CTranslate2's int8, GPT-2 124M on the same weights and threads.

    bench/llama_setup.sh && .venv/bin/python bench/server_weights.py --skip-compile && \\
        .venv/bin/python bench/int8_weights.py           # the peers' weights (bench/work/int8/)
    scripts/build.sh --target runtime_bench
    .venv/bin/python bench/int8_bench.py [--threads 2] [--batches 1 8] [--contexts 128 1024] [--gen 32]
        [--reps 5] [--rounds 2] [--size 124m] [--out DIR]

Our artifacts are compiled here once, those the run names (bench/work/int8/gpt2-124m-{bf16,bf16math,int8,int4}/cpu,
from the Hugging Face layout safetensors the peers convert, `--dtype bf16`, int4 in groups of 32; the prefill's
attention math, decode's measured by the compile on its compiled decode graph (`--decode-attention auto`; the
`bf16math` and `bf16chunked` artifacts pin decode's to SDPA's math, the kernel every earlier run compared, and
to the kernel library's, each with the linear forms the measured bf16 artifact picked; `bf16kernel` and
`bf16kernelchunked` pin the kernel library's linear in every graph too, nothing measured (`bf16panels` its
linear on weights packed in panels at load); `int8kernel` its int8
linear, `int8q8` the same but decode_one's with int8 activations (linear_int8_q8), `int4kernel` its int4 one
(int8 activations), decode's attention math; each of `bf16panels`, `int8q8`, `int4kernel` with a `chunked` suffix
the same with the kernel library's decode attention; `int4g64` ones int4 in groups of 64 inputs, Q4_0's bytes a
weight), the linear forms measured by the compile). Rows:
bench/runtime_bench.c `generate` for ours (one session of B sequences, one batched prefill of C - GEN tokens, GEN
greedy steps), bench/int8_peers.py for the peers (its docstring says how each is timed); context C as
bench/suite.py's. Every implementation runs in its own process, rounds alternate the implementations, and each cell
is the median of its repetitions over all rounds (the first repetition of each process dropped for ours, as
suite.py does).

Roofline: a step must read every weight once (the position table but one row) and each sequence's KV cache
up to its position; each row's weights are its own (int8 + scales, Q8_0's blocks, bf16), over the read
bandwidth measured at the start (bench/suite.py's read_bandwidth).
Output: results.json, results.md in bench/results/cpu-<date>-int8/ (-2, -3, ... after the day's first; or --out).

`--level x86-64-v3` compares the portable level instead of this CPU's best: our artifacts compiled with `--isa
x86-64-v3` (bench/work/int8/gpt2-124m-*-x86-64-v3/) and run with the kernels' AVX2 path (GPT_KERNELS_ISA=avx2),
against llama.cpp built for AVX2 alone (`LLAMA_LEVEL=avx2 bench/llama_setup.sh`); CTranslate2 picks its own.

`--size 355m` runs GPT-2 355M instead (bench/gpt2_sizes.py; its weights from `bench/server_weights.py --size
355m` and `bench/int8_weights.py --size 355m`, our artifacts bench/work/int8/gpt2-355m-*/).
"""

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import int8_peers  # noqa: E402
import suite  # noqa: E402
from gpt2_sizes import SIZES, Files, config  # noqa: E402

sys.path.insert(0, str(ROOT / "aot"))
from gpt_aot.artifact.manifest import (  # noqa: E402
    FORMAT_VERSION,
    INT4_PAIR_BLOCKS_FORMAT_VERSION,
    KERNELS_FORMAT_VERSION,
    WITHOUT_KERNELS_FORMAT_VERSION,
)
from gpt_aot.model import kernels  # noqa: E402

FORMAT_VERSIONS = (
    FORMAT_VERSION,
    INT4_PAIR_BLOCKS_FORMAT_VERSION,
    KERNELS_FORMAT_VERSION,
    WITHOUT_KERNELS_FORMAT_VERSION,
)


def is_current(manifest: Path) -> bool:
    """Whether an artifact was compiled in a format and against a kernel library this runtime reads."""
    if not manifest.exists():
        return False
    record = json.loads(manifest.read_text())
    library = record.get("kernels", {}).get("version")
    return record["format_version"] in FORMAT_VERSIONS and (library is None or library == kernels.load())


PY = sys.executable
# Our artifacts, each at Files(size).artifact(name).
ARTIFACTS = ("int8", "int4", "bf16", "bf16math", "bf16chunked", "bf16kernel", "bf16panels", "bf16kernelchunked",
             "bf16panelschunked", "int8kernel", "int8q8", "int8q8chunked", "int8q8panelschunked", "int4kernel",
             "int4kernelchunked", "int4panelschunked", "int4kernelpanelschunked", "int4g64kernelchunked",
             "int4g64kernelpanelschunked")  # fmt: skip
# Decode's attention pinned: the others measure it (auto). A pinned artifact takes the linear forms the measured
# bf16 artifact picked (compiled first), so the two differ by decode's attention alone.
DECODE_ATTENTION = {
    "bf16math": "math",
    "bf16chunked": "chunked",
    "bf16kernel": "math",
    "bf16panels": "math",
    "bf16kernelchunked": "chunked",
    "bf16panelschunked": "chunked",
    "int8kernel": "math",
    "int8q8": "math",
    "int8q8chunked": "chunked",
    "int8q8panelschunked": "chunked",
    "int4kernel": "math",
    "int4kernelchunked": "chunked",
    "int4panelschunked": "chunked",
    "int4kernelpanelschunked": "chunked",
    "int4g64kernelchunked": "chunked",
    "int4g64kernelpanelschunked": "chunked",
}
# The kernel library's linear pinned in every graph (int8kernel: its linear_int8 over int8 rows; int4kernel: its
# linear_int4 over int4 blocks): nothing measured on the build host at all.
KERNEL_LINEAR = ("bf16kernel", "bf16kernelchunked", "int8kernel", "int4kernel", "int4kernelchunked",
                 "int4g64kernelchunked")  # fmt: skip
# Its linear on bf16 weights packed in panels at load (the tied head its row kernel), every graph.
PANELS_LINEAR = ("bf16panels", "bf16panelschunked")
# Its int8 linear with the activations rounded to int8 blocks (linear_int8_q8) in decode_one, where it reads the
# weights in a third of the instructions, and its plain int8 linear in the graphs of several rows, where the two run
# alike or q8 slower (bench/results/cpu-2026-11-28-q8/).
Q8_LINEAR = ("int8q8", "int8q8chunked")
# The same products on the int8 weights packed in q8 panels at load (linear_int8_q8_panels), every graph: at 8 rows
# 2.5-3x the rows' speed, at one about the same.
Q8_PANELS_LINEAR = ("int8q8panelschunked",)
# The kernel library's int4 linear on the blocks packed in u4 panels at load (linear_int4_panels), every graph; or
# decode_one on the stored blocks (faster at one row) and the batched graphs on the panels (both copies held).
INT4_PANELS_LINEAR = ("int4panelschunked", "int4kernelpanelschunked", "int4g64kernelpanelschunked")
# An int8 KV cache (--kv-dtype int8) under another artifact's options: <that artifact>kv8.
KV_INT8 = ("bf16panelschunkedkv8", "int8q8panelschunkedkv8", "int4panelschunkedkv8")
ARTIFACTS += KV_INT8
# llama.cpp's Q8_0 KV cache (-ctk/-ctv q8_0, with its flash attention, which a quantized V needs) under a GGUF's
# weights: <weights>kvq8, the peer of our int8 cache.
LLAMA_KV_Q8 = "kvq8"
LLAMA_KV_Q8_ARGS = ["-ctk", "q8_0", "-ctv", "q8_0", "-fa", "on"]
# --quantize of each quantized artifact
QUANTIZE = {"int8": "int8", "int4": "int4", "int8kernel": "int8", "int8q8": "int8", "int8q8chunked": "int8",
            "int8q8panelschunked": "int8", "int4panelschunked": "int4", "int4kernelpanelschunked": "int4",
            "int4kernel": "int4", "int4kernelchunked": "int4", "int4g64kernelchunked": "int4",
            "int4g64kernelpanelschunked": "int4"}  # fmt: skip
# int4's groups of inputs where not 32: at 64, a scale and a zero (bf16) a group cost 4.5 bits a weight, Q4_0's
# bytes (its groups of 32 hold a scale alone); at 32 our int4 is Q4_1's scheme and bytes (5 bits a weight).
GROUP_SIZE = {"int4g64kernelchunked": 64, "int4g64kernelpanelschunked": 64}


# Per --level: the suffix of our artifacts' directories, their --isa, the kernels' path, llama.cpp's build.
LEVELS = {
    "native": {"suffix": "", "isa": "native", "kernels": None, "llama": "native"},
    "x86-64-v3": {"suffix": "-x86-64-v3", "isa": "x86-64-v3", "kernels": "avx2", "llama": "avx2"},
}
LEVEL = LEVELS["native"]  # main() sets the one asked for


def artifact(files: Files, weights: str) -> Path:
    """Our artifact of `weights` at the run's level."""
    return files.artifact(weights + LEVEL["suffix"])


def compile_ours(files: Files, weights: str) -> float | None:
    """Our artifact of the shared weights (kept once compiled in the current format); its compile seconds
    when compiled now."""
    out = artifact(files, weights)
    manifest = out / "cpu" / "manifest.json"
    if is_current(manifest):
        return None
    kv_int8 = weights in KV_INT8
    weights = weights.removesuffix("kv8") if kv_int8 else weights  # the options are the base artifact's
    # --tokenizer names merges.txt: vocab.json alone would be taken for an HF tokenizer.json (server_weights.py).
    cmd = [PY, "-m", "gpt_aot", "compile", "--ckpt", str(files.hf_dir / "model.safetensors")]
    cmd += ["--tokenizer", str(files.hf_dir / "merges.txt"), "--dtype", "bf16", "--attention", "math"]
    cmd += ["--isa", LEVEL["isa"]]
    cmd += ["--decode-attention", DECODE_ATTENTION.get(weights, "auto")]
    if weights in KERNEL_LINEAR:
        cmd += ["--decode-linear", "kernel", "--batched-linear", "kernel"]
    elif weights in PANELS_LINEAR:
        cmd += ["--decode-linear", "panels", "--batched-linear", "panels"]
    elif weights in Q8_LINEAR:
        cmd += ["--decode-linear", "q8", "--batched-linear", "kernel"]
    elif weights in Q8_PANELS_LINEAR:
        cmd += ["--decode-linear", "q8panels", "--batched-linear", "q8panels"]
    elif weights in INT4_PANELS_LINEAR:
        decode_one = "int4panels" if weights == "int4panelschunked" else "kernel"
        cmd += ["--decode-linear", decode_one, "--batched-linear", "int4panels"]
    elif weights in DECODE_ATTENTION:
        picked = json.loads((artifact(files, "bf16") / "cpu" / "manifest.json").read_text())["graphs"]
        cmd += ["--decode-linear", picked["decode_one"]["linear"]["form"]]
        cmd += ["--batched-linear", picked["decode"]["linear"]["form"]]
    cmd += ["--max-batch", "8", "-o", str(out)] + (["--quantize", QUANTIZE[weights]] if weights in QUANTIZE else [])
    cmd += ["--group-size", str(GROUP_SIZE[weights])] if weights in GROUP_SIZE else []
    cmd += ["--kv-dtype", "int8"] if kv_int8 else []
    start = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT / "aot"), "PATH": "/usr/bin:/bin"})
    return time.perf_counter() - start


def our_rows(files: Files, weights: str, threads: int, batches, contexts, gen: int, reps: int) -> list[dict]:
    art = artifact(files, weights) / "cpu"
    rows = []
    for batch in batches:
        for context in contexts:
            cmd = [str(suite.RUNTIME_BENCH), "generate", str(art), "--threads", str(threads), "--batch", str(batch)]
            cmd += ["--context", str(context - gen), "--tokens", str(gen), "--reps", str(reps + 1)]
            out = suite.run_row(cmd)
            if "error" in out:
                raise RuntimeError(f"runtime_bench {weights} batch {batch} context {context}: {out['error']}")
            steps = out["decode_ms_per_token"][1:]
            rows.append({"impl": "ours", "weights": weights, "batch": batch, "context": context, "steps_ms": steps,
                         "details": {"tokens": out["tokens"], "peak_rss_mib": out["peak_rss_mib"]}})  # fmt: skip
    return rows


def ct2_rows(args, check: bool) -> list[dict]:
    """CTranslate2's rows (int8_peers.ct2_rows) from a process of its own: its own OpenMP runtime and thread pool,
    apart from ours. (Until 2026-11-30 this process's kernel library also put libtorch_cpu in the global symbol
    scope, and CTranslate2's bundled GEMM calls bound to torch's copies: wrong tokens, bench/ct2_beside_kernels.py.)"""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rows.json"
        cmd = [PY, str(ROOT / "bench" / "int8_peers.py"), "--peer", "ct2", "--threads", str(args.threads)]
        cmd += ["--batches", *map(str, args.batches), "--contexts", *map(str, args.contexts), "--gen", str(args.gen)]
        cmd += ["--reps", str(args.reps), "--size", args.size, "--out", str(out)] + ([] if check else ["--no-check"])
        subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
        return json.loads(out.read_text())


def weight_bytes(files: Files, impl: str, weights: str) -> int:
    """Bytes of the weights one decode step reads: all but the position table's other rows."""
    if impl == "ours":
        manifest = json.loads((artifact(files, weights) / "cpu" / "manifest.json").read_text())
        quantization = manifest["weights"].get("quantization")
        total = quantization["weight_bytes"] if quantization else manifest["files"]["weights.safetensors"]["size"]
    elif impl == "llama.cpp":
        total = files.gguf(weights.removesuffix(LLAMA_KV_Q8)).stat().st_size
    else:
        total = (files.ct2_dir / "model.bin").stat().st_size
    shape = config(files.size)
    return total - (shape["block_size"] - 1) * shape["n_embd"] * 2  # the position table's unread rows, bf16


def linear_picks(files: Files, weights: str) -> dict:
    """Each graph's linear pick as our artifact's manifest records it (form, candidates' ms), and the weights'
    layout."""
    manifest = json.loads((artifact(files, weights) / "cpu" / "manifest.json").read_text())
    picks = {graph: manifest["graphs"][graph]["linear"] for graph in ("prefill", "decode", "decode_one")}
    return {"layout": manifest["weights"].get("quantization", {}).get("layout"), **picks}


def attention_pick_of(files: Files, weights: str) -> dict:
    """Decode's attention kernel as our artifact's manifest records it: pinned, or each candidate's times on
    the compiled decode graph."""
    return json.loads((artifact(files, weights) / "cpu" / "manifest.json").read_text())["attention"]["decode"]


def cache_element_bytes(files: Files, impl: str, weights: str) -> float:
    """Bytes a cached key or value element takes: bf16's 2, CTranslate2's int8 fp32 4, an int8 cache's one and its
    scale's share (ours: 4 bytes a head; Q8_0: 2 bytes a block of 32)."""
    if impl == "CTranslate2":
        return 4  # CTranslate2's int8 keeps its cache in fp32
    if impl == "ours" and weights in KV_INT8:
        shape = config(files.size)
        return 1 + 4 / (shape["n_embd"] // shape["n_head"])
    if impl == "llama.cpp" and weights.endswith(LLAMA_KV_Q8):
        return 34 / 32
    return 2


def cache_bytes(files: Files, batch: int, positions: float, element: float) -> float:
    shape = config(files.size)
    return 2 * shape["n_layer"] * batch * positions * shape["n_embd"] * element


def summarize(files: Files, cells: dict, gen: int, bandwidth: float) -> list[dict]:
    rows = []
    for (impl, weights, batch, context), cell in cells.items():
        ms = statistics.median(cell["steps_ms"])
        cache_element = cache_element_bytes(files, impl, weights)
        read = weight_bytes(files, impl, weights) + cache_bytes(files, batch, context - (gen - 1) / 2, cache_element)
        rows.append({"impl": impl, "weights": weights, "batch": batch, "context": context, "ms_per_step": ms,
                     "min_ms": min(cell["steps_ms"]), "max_ms": max(cell["steps_ms"]),
                     "tokens_per_s": batch / (ms / 1e3), "bytes_per_step": read,
                     "roofline_ms": read / bandwidth * 1e3, "roofline_fraction": read / bandwidth * 1e3 / ms,
                     "samples": len(cell["steps_ms"]), "details": cell["details"]})  # fmt: skip
    return rows


def report(out: Path, result: dict) -> None:
    rows = {(r["impl"], r["weights"], r["batch"], r["context"]): r for r in result["rows"]}
    impls = sorted({(r["impl"], r["weights"]) for r in result["rows"]}, key=lambda k: (k[0] != "ours", k))
    cols = [(b, c) for b in result["batches"] for c in result["contexts"]]
    lines = [
        f"# int8 and int4 decode, GPT-2 {result.get('size', '124m').upper()}, {result['threads']} threads, ISA level "
        f"{result.get('level', 'native')} ({result['machine']['cpu']})",
        "",
        f"{result['date']}, commit {result['machine']['commit']}, torch {result['machine']['torch']}, llama.cpp "
        f"{result['llama_version']}, CTranslate2 {result['ct2_version']}; read bandwidth "
        f"{result['read_bandwidth'] / 1e9:.1f} GB/s; {result['rounds']} rounds × {result['reps']} repetitions of "
        f"{result['gen']} steps per cell, median. ms per decode step (B tokens), roofline fraction in brackets.",
        "",
        "| implementation | " + " | ".join(f"batch {b}, context {c}" for b, c in cols) + " |",
        "|---|" + "---|" * len(cols),
    ]
    for impl, weights in impls:
        cells = []
        for b, c in cols:
            r = rows.get((impl, weights, b, c))
            cells.append(f"{r['ms_per_step']:.2f} ({r['roofline_fraction']:.0%})" if r else "—")
        lines.append(f"| {impl} {weights} | " + " | ".join(cells) + " |")
    lines += ["", "Our linear forms (the compile's picks; ms of each candidate on the pick's own work):", ""]
    for weights, picks in result.get("linear_picks", {}).items():
        for graph in ("decode_one", "decode", "prefill"):
            pick = picks[graph]
            times = ", ".join(f"{f} {c['ms']:.1f}" for f, c in pick.get("candidates", {}).items() if c.get("runs"))
            lines.append(f"- {weights} {graph}: {pick['form']} ({pick['selected_by']}{': ' + times if times else ''})")
        if picks["layout"]:
            lines.append(f"- {weights} weights layout: {picks['layout']}")
    lines += [
        "",
        "Decode's attention (the compile's pick; ms of each candidate's compiled decode graph, per setting):",
        "",
    ]
    for weights, pick in result.get("decode_attention_picks", {}).items():
        times = "; ".join(
            f"{kind} " + ", ".join(f"{setting} {ms:.1f}" for setting, ms in c["ms_by_setting"].items())
            for kind, c in pick.get("candidates", {}).items()
            if c.get("runs")
        )
        lines.append(f"- {weights}: {pick['backend']} ({pick['selected_by']}{': ' + times if times else ''})")
    for base in [weights for impl, weights in impls if impl == "ours"]:
        lines += ["", f"Ratios (time of the other over ours {base}; > 1: ours {base} is faster):", ""]
        for impl, weights in impls:
            if (impl, weights) == ("ours", base):
                continue
            ratios = []
            for b, c in cols:
                ours, other = rows.get(("ours", base, b, c)), rows.get((impl, weights, b, c))
                ratios.append(f"{other['ms_per_step'] / ours['ms_per_step']:.2f}×" if ours and other else "—")
            pairs = zip(cols, ratios, strict=True)
            lines.append(f"- vs {impl} {weights}: " + ", ".join(f"batch {b} context {c}: {x}" for (b, c), x in pairs))
    (out / "results.md").write_text("\n".join(lines) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--contexts", type=int, nargs="+", default=[128, 1024])
    ap.add_argument("--gen", type=int, default=32)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument(
        "--impls",
        nargs="+",
        default=["ours-int8", "ours-int4", "ours-bf16", "llama-q8_0", "llama-q4_0", "llama-q4_k_m", "llama-bf16",
                 "ct2-int8"],
    )  # fmt: skip
    ap.add_argument("--size", choices=SIZES, default="124m", help="GPT-2's size (bench/gpt2_sizes.py)")
    ap.add_argument("--level", choices=LEVELS, default="native", help="the ISA level compared (see above)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    files = Files(args.size)
    global LEVEL
    LEVEL = LEVELS[args.level]
    int8_peers.use_llama_level(LEVEL["llama"])
    if LEVEL["kernels"]:  # the runtime_bench processes inherit it
        os.environ["GPT_KERNELS_ISA"] = LEVEL["kernels"]

    ours = [w for w in ARTIFACTS if f"ours-{w}" in args.impls]
    if (
        any(
            w in DECODE_ATTENTION
            and w not in KERNEL_LINEAR + PANELS_LINEAR + Q8_LINEAR + Q8_PANELS_LINEAR + INT4_PANELS_LINEAR
            for w in ours
        )
        and "bf16" not in ours
    ):
        ours.insert(0, "bf16")  # the pinned ones take its linear forms
    compile_s = {w: compile_ours(files, w) for w in ours}
    ref = int8_peers.reference(files) if any(not i.startswith("ours") for i in args.impls) else None
    torch.set_num_threads(args.threads)
    bandwidth = suite.read_bandwidth("cpu")
    shape = (args.batches, args.contexts, args.gen, args.reps)
    cells: dict = {}
    for round_ in range(args.rounds):
        for impl in args.impls:
            print(f"round {round_ + 1}: {impl}", flush=True)
            name, weights = impl.split("-")
            if name == "ours":
                rows = our_rows(files, weights, args.threads, *shape)
            elif name == "llama":
                kv_q8 = weights.endswith(LLAMA_KV_Q8)
                rows = int8_peers.llama_rows(files.gguf(weights.removesuffix(LLAMA_KV_Q8)), args.threads, *shape,
                                             weights=weights, ref=ref if round_ == 0 else None,
                                             extra=LLAMA_KV_Q8_ARGS if kv_q8 else [])  # fmt: skip
            else:
                rows = ct2_rows(args, check=round_ == 0)
            for row in rows:
                impl_name = {"ours": "ours", "llama": "llama.cpp", "ct2": "CTranslate2"}[name]
                key = (impl_name, weights, row["batch"], row["context"])
                cell = cells.setdefault(key, {"steps_ms": [], "details": {}})
                cell["steps_ms"] += row.get("steps_ms") or row["details"]["ms_per_step"]["all"]
                cell["details"].update(row["details"])
    result = {
        "machine": suite.machine(),
        "date": datetime.date.today().isoformat(),
        "size": args.size,
        "level": args.level,
        "kernels_isa": os.environ.get("GPT_KERNELS_ISA", "widest"),
        "threads": args.threads,
        "batches": args.batches,
        "contexts": args.contexts,
        "gen": args.gen,
        "reps": args.reps,
        "rounds": args.rounds,
        "read_bandwidth": bandwidth,
        "compile_s": compile_s,
        "linear_picks": {w: linear_picks(files, w) for w in ours},
        "decode_attention_picks": {w: attention_pick_of(files, w) for w in ours},
        "llama_version": int8_peers.llama_version(),
        "ct2_version": __import__("ctranslate2").__version__ if any(i.startswith("ct2") for i in args.impls) else None,
        "rows": summarize(files, cells, args.gen, bandwidth),
    }
    out = args.out or ROOT / "bench" / "results" / f"cpu-{result['date']}-int8"
    if args.out is None:  # never over an earlier run of the same day
        out = next(p for n in range(1, 100) if not (p := out.with_name(out.name + (f"-{n}" if n > 1 else ""))).exists())
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    report(out, result)
    print((out / "results.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
