"""bench/run's driver: every row side by side in one run, on whatever device is here.

Each row runs in its own process (bench/peers.py for PyTorch eager and
torch.compile, build/bench/runtime_bench for libgpt_runtime), so compile caches
and peak memory are per row. Results: bench/results/<device>-<date>/ with
results.json, results.md and PNG charts (bench/report.py).
"""

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import torch

from gpt_aot.artifact.manifest import FORMAT_VERSION
from gpt_aot.model.gpt import GPT, GPTConfig

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
RUNTIME_BENCH = ROOT / "build" / "bench" / "runtime_bench"
NO_CUDA_GRAPHS = "gpt-aot runtime, no CUDA graphs"
AOTI_BENCH = ROOT / "build" / "bench" / "aoti_bench"
sys.path.insert(0, str(ROOT / "bench"))

import report  # noqa: E402

# The seed tables' training config (nanoGPT 85M on shakespeare_char: batch 6 x 1024, accum 5).
GPU_TRAIN = dict(
    model=dict(block_size=1024, n_layer=12, n_head=12, n_embd=768, bias=False, dropout=0.0),
    batch=6, seq=1024, accum=5, iters=20, attention=("naive", "math", "flash", "efficient", "cudnn"),
)  # fmt: skip
# Scaled for 2 CPU cores: the same shape of run, a smaller model and fewer iterations.
CPU_TRAIN = dict(
    model=dict(block_size=256, n_layer=4, n_head=4, n_embd=256, bias=False, dropout=0.0),
    batch=4, seq=256, accum=2, iters=8, attention=("naive", "math", "flash"),
)  # fmt: skip
GPT2 = dict(block_size=1024, n_layer=12, n_head=12, n_embd=768, bias=True, vocab_size=50304, dropout=0.0)
NANOGPT_85M = {**GPU_TRAIN["model"], "vocab_size": 65}  # the seed's shakespeare_char model
# Each dtype compares every implementation on the same weights in that dtype.
INFER = dict(
    models={"gpt2-124M": GPT2, "nanogpt-85M": NANOGPT_85M}, batches=(1, 8), contexts=(128, 1024), tokens=32, reps=5,
    dtypes={"cpu": ("fp32", "bf16"), "cuda": ("bf16",)},
)  # fmt: skip


def machine() -> dict:
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "")
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return {
        "device": "cuda" if gpu else "cpu",
        "gpu": gpu,
        "cpu": cpu,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "commit": commit.stdout.strip(),
        "date": datetime.date.today().isoformat(),
    }


def run_row(cmd: list[str]) -> dict:
    """Runs one row's process; its JSON (peak RSS included: the row reads its own) plus wall time."""
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
        err.seek(0)
        lines = err.read().strip().splitlines()
    if proc.returncode != 0:
        return {"error": lines[-1] if lines else f"exit {proc.returncode}"}
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    row["process_s"] = time.perf_counter() - started
    return row


def seconds(fn, device: str) -> float:
    """Wall time of one call of `fn`, the device's queued work included."""
    if device == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    if device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t0


def peak_matmul_flops(device: str) -> float:
    """Measured dense matmul throughput: the MFU denominator (fp32 on CPU, bf16 on a GPU)."""
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    n = 4096 if device == "cuda" else 1024
    a = torch.randn(n, n, device=device, dtype=dtype)
    for _ in range(3):
        a @ a
    reps = 50 if device == "cuda" else 10
    return 2 * n**3 * reps / seconds(lambda: [a @ a for _ in range(reps)], device)


def read_bandwidth(device: str) -> float:
    """Measured memory read bandwidth in bytes/s over a tensor far larger than the caches: the decode
    roofline's denominator, since a decode step reads every weight once. The best of a sum and a
    matrix-vector product (a decode step's own access pattern), as one kernel alone can read low."""
    x = torch.ones((1 << 30 if device == "cuda" else 1 << 27), device=device)  # 4 GiB / 512 MiB of fp32
    rows, ones = x.view(-1, 4096), torch.ones(4096, device=device)
    reads = (x.sum, lambda: rows @ ones)
    return x.numel() * x.element_size() / min(seconds(read, device) for read in reads for _ in range(8))


def decode_bytes_per_step(model: dict, dtype: str, batch: int, positions: float) -> float:
    """What one decode step must read: every weight but the position table (one row of it is used), and
    each row's KV cache over the `positions` it attends to."""
    with torch.device("meta"):
        gpt = GPT(GPTConfig.from_dict(model))
    weights = sum(p.numel() for p in gpt.parameters()) - gpt.transformer.wpe.weight.numel()
    cache = 2 * model["n_layer"] * batch * positions * model["n_embd"]
    return (weights + cache) * (2 if dtype == "bf16" else 4)


def train_flops_per_iter(model: dict, batch: int, seq: int, accum: int, vocab: int) -> float:
    """nanoGPT's estimate_mfu: 6N + 12 L H Q T per token, N without position embeddings."""
    L, H, C = model["n_layer"], model["n_head"], model["n_embd"]
    n_params = 12 * L * C * C + vocab * C  # blocks + tied embedding (biases and norms are negligible)
    per_token = 6 * n_params + 12 * L * H * (C // H) * seq
    return per_token * seq * batch * accum


def cached_compile_seconds(timing: Path) -> float | None:
    """A compile's recorded seconds, if it made graphs of the current artifact format (whose
    version names the graphs' signatures); None when it must run again."""
    if not timing.exists():
        return None
    record = json.loads(timing.read_text())
    return record["seconds"] if record.get("format_version") == FORMAT_VERSION else None


def compile_artifact(config: dict, attention: str, out: Path, device: str, dtype: str, train: bool, tokenizer) -> float:
    """Compiles `out` once per artifact format and returns how long the compile took, in seconds."""
    timing = out.parent / f"{out.name}.compile.json"
    if (seconds := cached_compile_seconds(timing)) is not None:
        return seconds
    out.parent.mkdir(parents=True, exist_ok=True)
    config_file = out.parent / f"{out.name}.config.json"
    config_file.write_text(json.dumps(config))
    cmd = [PY, "-m", "gpt_aot", "compile", "--config", str(config_file), "--target", device, "-o", str(out)]
    cmd += ["--attention", attention, "--dtype", dtype]
    cmd += ["--train"] if train else []
    cmd += ["--tokenizer", str(tokenizer)] if tokenizer else []
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    seconds = time.perf_counter() - t0
    timing.write_text(json.dumps({"seconds": seconds, "format_version": FORMAT_VERSION}))
    return seconds


def compile_plain_aoti(config: dict, kernels: dict, out: Path, device: str, dtype: str) -> float:
    """bench/aoti_plain.py once per artifact format; returns its compile time in seconds."""
    timing = out / "compile.json"
    if (seconds := cached_compile_seconds(timing)) is not None:
        return seconds
    cmd = [PY, str(ROOT / "bench" / "aoti_plain.py"), "--config", json.dumps(config)]
    cmd += ["--attention", kernels["attention"], "--decode-attention", kernels["decode_attention"]]
    cmd += ["--device", device, "--dtype", dtype, "-o", str(out)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return json.loads(timing.read_text())["seconds"]


def summarize(times: list[float]) -> dict:
    rest = times[1:] or times
    return {
        "first_ms": times[0],
        "avg_ms": statistics.fmean(times),
        "median_ms": statistics.median(rest),
        "min_ms": min(rest),
        "max_ms": max(rest),
    }


def write_batches(tokens: Path, out: Path, spec: dict) -> None:
    """Random windows of the token file, as nanoGPT's get_batch takes them, once for every row."""
    data = np.memmap(tokens, dtype=np.uint16, mode="r")
    rng = np.random.default_rng(1337)
    n = spec["iters"] * spec["accum"] * spec["batch"]
    starts = rng.integers(0, len(data) - spec["seq"] - 1, n)
    x = np.stack([data[i : i + spec["seq"]] for i in starts]).astype(np.int32)
    y = np.stack([data[i + 1 : i + 1 + spec["seq"]] for i in starts]).astype(np.int32)
    out.parent.mkdir(parents=True, exist_ok=True)
    np.concatenate([x.ravel(), y.ravel()]).tofile(out)


def training_model(device: str, meta: Path) -> tuple[dict, dict, Path | None]:
    """The training table's spec, model config and tokenizer for `device`."""
    spec = GPU_TRAIN if device == "cuda" else CPU_TRAIN
    vocab = json.loads(meta.read_text())["vocab_size"] if device == "cpu" else 50304
    return spec, {**spec["model"], "vocab_size": vocab}, (meta if device == "cpu" else None)


def compile_training_artifact(model: dict, attention: str, work: Path, device: str, tokenizer) -> tuple[Path, float]:
    """Our artifact for one training row (bf16 on a GPU, as the peers' autocast); its compile seconds."""
    art = work / f"train-{attention}"
    dtype = "bf16" if device == "cuda" else "fp32"  # the peers train fp32 with bf16 autocast on a GPU
    return art, compile_artifact(model, attention, art, device, dtype, True, tokenizer)


def bench_training(
    device: str, work: Path, data: Path, meta: Path, threads: int, peak: float, kernels: tuple
) -> list[dict]:
    spec, model, tokenizer = training_model(device, meta)
    vocab = model["vocab_size"]
    flops = train_flops_per_iter(model, spec["batch"], spec["seq"], spec["accum"], vocab)
    tokens = spec["batch"] * spec["seq"] * spec["accum"]
    common = ["--batch", str(spec["batch"]), "--seq", str(spec["seq"]), "--accum", str(spec["accum"])]
    batches = work / "train-batches.bin"
    write_batches(data / "train.bin", batches, spec)
    common += ["--iters", str(spec["iters"]), "--threads", str(threads), "--batches", str(batches)]
    rows = []
    for attention in kernels or spec["attention"]:
        for impl in ("eager", "torch.compile", "gpt-aot runtime"):
            print(f"train {attention:9} {impl}", flush=True)
            compile_s = None
            if impl == "gpt-aot runtime":
                art, compile_s = compile_training_artifact(model, attention, work, device, tokenizer)
                row = run_row([str(RUNTIME_BENCH), "train", str(art), *common])
                # Compile falls back to another kernel when this one's compiled backward is wrong.
                manifest = json.loads(next(art.glob("*/manifest.json")).read_text())
                row["trained_with"] = manifest["training"]["attention"]
            else:
                mode = "eager" if impl == "eager" else "compile"
                cmd = [PY, str(ROOT / "bench" / "peers.py"), "train", "--mode", mode, "--attention", attention]
                row = run_row([*cmd, "--config", json.dumps(model), "--device", device, *common])
            if "iter_ms" in row:
                row.update(summarize(row["iter_ms"]))
                row["tokens_per_s"] = tokens / (row["median_ms"] / 1e3)
                row["mfu"] = flops / (row["median_ms"] / 1e3) / peak
                print(f"  {row['median_ms']:.1f} ms/iter, MFU {row['mfu']:.3f}", flush=True)  # kept if stopped early
            else:
                print(f"  {row.get('error')}", flush=True)
            rows.append({"attention": attention, "impl": impl, "compile_s": compile_s, **row})
    return rows


def bench_inference(device: str, work: Path, threads: int, bandwidth: float, spec: dict) -> list[dict]:
    rows = []
    for name, model in spec["models"].items():
        for dtype in spec["dtypes"][device]:
            rows += bench_inference_model(spec, name, model, device, dtype, work, threads, bandwidth)
    return rows


def compile_inference_artifact(name: str, m: dict, device: str, dtype: str, work: Path) -> tuple[Path, float]:
    """Our artifact for the inference rows, attention and linear forms measured; its compile seconds."""
    art = work / f"{name}-infer-{dtype}"
    return art, compile_artifact(m, "auto", art, device, dtype, False, None)


def picked_kernels(art: Path) -> dict:
    """The attention kernels our artifact's measurement picked, which every row of its model runs."""
    picked = json.loads(next(art.glob("*/manifest.json")).read_text())["attention"]
    return {"attention": picked["backend"], "decode_attention": picked["decode"]["backend"]}


def compile_plain_peer(name: str, m: dict, device: str, dtype: str, work: Path) -> tuple[Path, float]:
    """The plain AOTInductor packages of a model with our artifact's kernels (compiled first if need be)."""
    art, _ = compile_inference_artifact(name, m, device, dtype, work)
    kernels = picked_kernels(art)
    plain = work / f"{name}-plain-{dtype}-{kernels['attention']}-{kernels['decode_attention']}"
    return plain, compile_plain_aoti(m, kernels, plain, device, dtype)


def bench_inference_model(
    spec: dict, name: str, m: dict, device: str, dtype: str, work: Path, threads: int, bandwidth: float
) -> list[dict]:
    rows = []
    art, seconds = compile_inference_artifact(name, m, device, dtype, work)
    compile_s = {"gpt-aot runtime": seconds, NO_CUDA_GRAPHS: seconds}
    # Every row runs the kernels the artifact's measurement picked, for prefill and for decode.
    manifest = json.loads(next(art.glob("*/manifest.json")).read_text())
    kernels = picked_kernels(art)
    linears = {g: manifest["graphs"][g]["linear"]["form"] for g in ("decode", "decode_one")}  # the runtime's only
    # Ours first: a run cut short by a deadline (a GPU lease) still has the rows every ratio needs.
    impls = ["gpt-aot runtime", "plain AOTInductor", "eager", "torch.compile"]
    if device == "cuda":  # decode steps as CUDA graphs (the default) and as plain launches
        impls.insert(1, NO_CUDA_GRAPHS)
    plain, compile_s["plain AOTInductor"] = compile_plain_peer(name, m, device, dtype, work)
    shape = ["--vocab", str(m["vocab_size"]), "--n-layer", str(m["n_layer"]), "--n-head", str(m["n_head"])]
    shape += ["--head-dim", str(m["n_embd"] // m["n_head"]), "--block", str(m["block_size"])]
    shape += ["--bf16", str(int(dtype == "bf16"))]
    for batch in spec["batches"]:
        for context in spec["contexts"]:
            # The prompt fills the context but for the decoded tokens: decode runs at positions up to `context`.
            prompt = context - spec["tokens"]
            # Steps attend to prompt + 1 .. context positions: the floor counts their mean.
            floor_ms = decode_bytes_per_step(m, dtype, batch, context - (spec["tokens"] - 1) / 2) / bandwidth * 1e3
            common = ["--batch", str(batch), "--context", str(prompt), "--tokens", str(spec["tokens"])]
            common += ["--reps", str(spec["reps"]), "--threads", str(threads)]
            for impl in impls:
                print(f"generate {name} {dtype} batch {batch} context {context:5} {impl}", flush=True)
                if impl in ("gpt-aot runtime", NO_CUDA_GRAPHS):
                    graphs = ["--cuda-graphs", str(int(impl != NO_CUDA_GRAPHS))]
                    row = run_row([str(RUNTIME_BENCH), "generate", str(art), *common, *graphs])
                elif impl == "plain AOTInductor":
                    row = run_row([str(AOTI_BENCH), str(plain), *common, *shape, "--cuda", str(int(device == "cuda"))])
                else:
                    mode = "eager" if impl == "eager" else "compile"
                    cmd = [PY, str(ROOT / "bench" / "peers.py"), "generate", "--mode", mode]
                    cmd += ["--attention", kernels["attention"], "--decode-attention", kernels["decode_attention"]]
                    cmd += ["--config", json.dumps(m), "--device", device, "--dtype", dtype]
                    row = run_row([*cmd, *common])
                if "decode_ms_per_token" in row:  # per step of the whole batch
                    rest = row["decode_ms_per_token"][1:] or row["decode_ms_per_token"]
                    row["decode_ms"] = statistics.median(rest)
                    row["decode_min_ms"], row["decode_max_ms"] = min(rest), max(rest)
                    row["decode_tokens_per_s"] = batch / (row["decode_ms"] / 1e3)
                    row["roofline_fraction"] = floor_ms / row["decode_ms"]
                    prefill = statistics.median(row["prefill_ms"][1:] or row["prefill_ms"])
                    row["prefill_tokens_per_s"] = batch * prompt / (prefill / 1e3)
                    # In the log as it runs: a run stopped early still leaves its rows.
                    print(f"  decode {row['decode_ms']:.3f} ms/step, prefill {prefill:.2f} ms", flush=True)
                else:
                    print(f"  {row.get('error')}", flush=True)
                rows.append(
                    {"model": name, "dtype": dtype, "batch": batch, "context": context, **kernels,
                     "linears": linears, "impl": impl, "compile_s": compile_s.get(impl),
                     "roofline_ms": floor_ms, **row}
                )  # fmt: skip
    return rows


def compile_only(only: str | None, infer: dict, device: str, work: Path, meta: Path, kernels: list | None) -> None:
    """Every artifact the asked tables' rows of ours run, compiled side by side (each compile is
    one process, mostly single-threaded); a later run without --compile-only reuses them."""
    jobs = []
    if only in (None, "infer"):
        for name, model in infer["models"].items():
            jobs += [(f"{name} {dtype} (ours, then plain AOTInductor's)", compile_plain_peer,
                      (name, model, device, dtype, work)) for dtype in infer["dtypes"][device]]  # fmt: skip
    if only in (None, "train"):
        spec, model, tokenizer = training_model(device, meta)
        jobs += [(f"train {kind}", compile_training_artifact, (model, kind, work, device, tokenizer))
                 for kind in kernels or spec["attention"]]  # fmt: skip
    with ThreadPoolExecutor(max_workers=max(1, min(len(jobs), (os.cpu_count() or 1) // 2))) as pool:
        done = {label: pool.submit(fn, *fn_args) for label, fn, fn_args in jobs}
        for label, future in done.items():
            print(f"compiled {label} in {future.result()[1]:.0f} s", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--only", choices=["train", "infer"], help="run one table")
    p.add_argument("--threads", type=int, default=0, help="CPU threads for every row (0 = all cores)")
    p.add_argument("--out", help="results directory (default bench/results/<device>-<date>)")
    p.add_argument("--models", nargs="+", choices=list(INFER["models"]), help="inference: these models only")
    p.add_argument("--batches", nargs="+", type=int, help="inference: these batch sizes only")
    p.add_argument("--attention", nargs="+", help="training: these attention kernels only")
    p.add_argument("--compile-only", action="store_true", help="compile our artifacts, side by side, and stop")
    args = p.parse_args()
    info = machine()
    device = info["device"]
    threads = args.threads or os.cpu_count()
    torch.set_num_threads(threads)  # the peak and bandwidth figures use the rows' threads
    info["threads"] = threads
    work = ROOT / "bench" / "work" / device
    infer = {**INFER, "batches": tuple(args.batches or INFER["batches"])}
    infer["models"] = {k: v for k, v in INFER["models"].items() if not args.models or k in args.models}
    if args.compile_only:  # e.g. beside a GPU lease's tests, so that the rows later run on a quiet device
        compile_only(args.only, infer, device, work, ROOT / "data" / "bible_char" / "meta.json", args.attention)
        return
    out = Path(args.out) if args.out else ROOT / "bench" / "results" / f"{device}-{info['date']}"
    out.mkdir(parents=True, exist_ok=True)
    data = ROOT / "data" / "bible_char"
    peak, bandwidth = peak_matmul_flops(device), read_bandwidth(device)
    print(
        f"device {device} ({info['gpu'] or info['cpu']}), {threads} threads, matmul peak {peak / 1e9:.0f} GFLOP/s, "
        f"read bandwidth {bandwidth / 1e9:.1f} GB/s"
    )
    results = {"machine": info, "matmul_peak_flops": peak, "read_bandwidth": bandwidth, "scaled": device == "cpu"}
    results["config"] = {"train": CPU_TRAIN if device == "cpu" else GPU_TRAIN, "infer": infer}
    if args.only in (None, "train"):
        results["training"] = bench_training(device, work, data, data / "meta.json", threads, peak, args.attention)
    if args.only in (None, "infer"):
        results["inference"] = bench_inference(device, work, threads, bandwidth, infer)
    (out / "results.json").write_text(json.dumps(results, indent=2))
    report.write(results, out)
    print(f"results in {out}")


if __name__ == "__main__":
    main()
