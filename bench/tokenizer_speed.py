"""Encode throughput of the runtime's BPE tokenizer against tiktoken and HF tokenizers (issue #25).

    scripts/build.sh --target tokenize_bench
    .venv/bin/python bench/tokenizer_speed.py [--rounds 3] [--reps 3] [--hf-reps N] [--bench PATH] [--out DIR]

GPT-2's vocabulary (the rank file tests/fixtures/gpt2_ranks.py stores under .venv/share/) on the
corpus (gpt_aot.text.data.corpus_text(), the King James Bible, ~4.3 MB), in two modes: `whole`, the text
as one call, and `lines`, one call per line with its newline (prompt-sized calls). Rows:

- runtime: build/bench/tokenize_bench (`--bench`) calling gpt_model_tokenize on an artifact compiled
  once into bench/work/gpt2-tokenizer (a tiny model with GPT-2's tokenizer: only the tokenizer is used);
- tiktoken: `Encoding.encode_ordinary`, built from the same ranks (gpt_aot.text.tokenizer.to_tiktoken);
- hf: tokenizers' `Tokenizer.encode(text, add_special_tokens=False)` with `encode_special_tokens=True`
  (gpt_aot.text.tokenizer.to_hf, saved once to bench/work/hf-gpt2.json), RAYON_NUM_THREADS=1 and
  TOKENIZERS_PARALLELISM=false.

Every row is its own process pinned to one core (`taskset -c 0`), one thread; each process encodes
once untimed (warm-up; the ids' count and sha256 come from it) and then `--reps` times timed. A
round runs every (implementation, mode) once; the implementations' order rotates round by round.
Throughput = input bytes / seconds of one repetition (MB = 10^6 bytes), over wall time and over the
process's CPU time (which leaves out the slices other processes run on a shared core); a Python row's
time includes the Python call per line, as a Python caller pays it. Rows whose ids differ from
tiktoken's are reported but given no ratio. Results: results.json (summary and every row's runs),
runs.json (the raw runs, written before summarizing) and results.md in --out
(default bench/results/cpu-<date>-tokenize/). Not a test: nothing here runs in CI.
"""

import argparse
import datetime
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
WORK = ROOT / "bench" / "work"
ARTIFACT = WORK / "gpt2-tokenizer"
HF_JSON = WORK / "hf-gpt2.json"
TEXT = WORK / "corpus.txt"
RANKS = ROOT / ".venv" / "share" / "gpt2-ranks" / "gpt2.tiktoken"
SPECIAL = "<|endoftext|>=50256"
IMPLS = ("runtime", "tiktoken", "hf")
MODES = ("whole", "lines")
PIN = ["taskset", "-c", "0"]
ONE_THREAD = {"RAYON_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}

sys.path.insert(0, str(ROOT / "aot"))


def lines_of(text: str) -> list[str]:
    """The text cut after each newline, as tokenize_bench cuts it (str.splitlines also cuts at \\r, \\x85, ...)."""
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def peak_rss_mib() -> float:
    """This process's VmHWM (see bench/peak_rss.h)."""
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return -1.0


def tokenizer():
    from gpt_aot.importers.tokenizer_import import read_tokenizer

    return read_tokenizer(RANKS, pattern="gpt2", special=[SPECIAL])


def peer(impl: str, mode: str, reps: int, text_file: Path) -> dict:
    """One Python row: encode the text `reps` times after an untimed warm-up."""
    import numpy as np

    text = text_file.read_text(encoding="utf-8")
    size = len(text.encode("utf-8"))
    if impl == "tiktoken":
        from gpt_aot.text.tokenizer import to_tiktoken

        encode = to_tiktoken(tokenizer()).encode_ordinary
        version = __import__("tiktoken").__version__
    else:
        import tokenizers

        hf = tokenizers.Tokenizer.from_file(str(HF_JSON))
        hf.encode_special_tokens = True  # special tokens' text is ordinary text, as gpt_model_tokenize reads it

        def encode(s: str) -> list[int]:
            return hf.encode(s, add_special_tokens=False).ids

        version = tokenizers.__version__
    calls = [text] if mode == "whole" else lines_of(text)
    ids: list[int] = []
    for call in calls:  # warm-up; the ids' checksum
        ids.extend(encode(call))
    digest = hashlib.sha256(np.asarray(ids, dtype="<i4").tobytes()).hexdigest()
    rates, cpu_rates = [], []
    for _ in range(reps):
        start, cpu_start = time.perf_counter(), time.process_time()
        for call in calls:
            encode(call)
        cpu_seconds = time.process_time() - cpu_start
        rates.append(size / (time.perf_counter() - start) / 1e6)
        cpu_rates.append(size / cpu_seconds / 1e6)
    return {
        "impl": impl, "mode": mode, "bytes": size, "calls": len(calls), "tokens": len(ids),
        "ids_sha256": digest, "version": version, "mb_per_s": rates, "cpu_mb_per_s": cpu_rates,
        "peak_rss_mib": peak_rss_mib(),
    }  # fmt: skip


def run_row(cmd: list[str], env: dict) -> dict:
    """One row's process, pinned; its JSON plus the load average around it."""
    load_before = os.getloadavg()[0]
    proc = subprocess.run(PIN + cmd, env={**os.environ, **env}, capture_output=True, text=True)
    load_after = os.getloadavg()[0]
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        return {"error": lines[-1] if lines else f"exit {proc.returncode}"}
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    row["loadavg_1min"] = [round(load_before, 2), round(load_after, 2)]
    return row


def prepare(bench: Path) -> dict:
    """The corpus file, the runtime's artifact and HF's tokenizer file (each made once)."""
    from gpt_aot.text.data import corpus_text
    from gpt_aot.text.tokenizer import to_hf

    WORK.mkdir(parents=True, exist_ok=True)
    if not TEXT.exists():
        TEXT.write_text(corpus_text(), encoding="utf-8", newline="")
    if not (ARTIFACT / "manifest.json").exists() and not any(ARTIFACT.glob("*/manifest.json")):
        cmd = [PY, "-m", "gpt_aot", "compile", "--config", "tiny", "--set", "vocab_size=50257"]
        cmd += ["--tokenizer", str(RANKS), "--bpe-pattern", "gpt2", "--special", SPECIAL]
        # --max-batch 1 fails in export (a Dim with min = max = 1); 2 is the smallest that compiles.
        cmd += ["--attention", "math", "--decode-linear", "mm", "--batched-linear", "mm", "--max-batch", "2"]
        subprocess.run(cmd + ["-o", str(ARTIFACT)], check=True, stdout=subprocess.DEVNULL, env=aot_env())
    if not HF_JSON.exists():
        to_hf(tokenizer()).save(str(HF_JSON))
    if not bench.exists():
        sys.exit(f"{bench} is missing: scripts/build.sh --target tokenize_bench (or pass --bench)")
    return {"text": str(TEXT.relative_to(ROOT)), "bytes": TEXT.stat().st_size}


def aot_env() -> dict:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "aot"), os.environ.get("PYTHONPATH")])),
    }


def machine() -> dict:
    import tiktoken
    import tokenizers

    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True, text=True
    )
    return {
        "cpu": cpu, "cores": os.cpu_count(), "pinned_to": "core 0 (taskset -c 0), one thread per row",
        "python": platform.python_version(), "tiktoken": tiktoken.__version__, "tokenizers": tokenizers.__version__,
        "commit": commit.stdout.strip() + ("-dirty" if dirty.stdout.strip() else ""),
        "date": datetime.date.today().isoformat(),
    }  # fmt: skip


def summarize(row_runs: list[dict]) -> dict:
    """Wall-clock MB/s (median, min, max, each round's median), the same over CPU time, load averages."""
    rates = [r for run in row_runs for r in run["mb_per_s"]]
    cpu = [r for run in row_runs for r in run["cpu_mb_per_s"]]
    loads = [x for run in row_runs for x in run["loadavg_1min"]]
    return {
        "median": statistics.median(rates), "min": min(rates), "max": max(rates),
        "per_round_median": [statistics.median(run["mb_per_s"]) for run in row_runs],
        "cpu": {"median": statistics.median(cpu), "min": min(cpu), "max": max(cpu)},
        "loadavg_1min": [min(loads), max(loads)],
    }  # fmt: skip


def write_markdown(out: Path, result: dict) -> None:
    m = result["machine"]
    lines = [
        f"# Encode throughput: runtime vs tiktoken vs HF tokenizers — {m['cpu']} (cpu), {m['date']}",
        "",
        f"GPT-2's BPE (r50k ranks, GPT-2 split pattern) on the corpus ({result['text']['bytes']:,} bytes, "
        f"{result['rows']['runtime/lines']['calls'] if 'runtime/lines' in result['rows'] else '?'} lines). "
        f"Every row one process, one thread, pinned to core 0; {result['rounds']} rounds, each process timing "
        f"{', '.join(f'{k} {v}' for k, v in result['reps'].items())} repetitions after one untimed, "
        "implementations alternating round by round. "
        f"tiktoken {m['tiktoken']}, tokenizers {m['tokenizers']}, Python {m['python']}, commit {m['commit']}.",
        "",
        f"Command: `{result['command']}`",
        "",
        "| mode | impl | MB/s (wall) median | min–max | per-round medians | MB/s (CPU time) median | min–max | "
        "tokens | same ids as tiktoken | runtime / this (wall) | runtime / this (CPU) | load avg (1 min) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for mode in MODES:
        for impl in IMPLS:
            row = result["rows"].get(f"{impl}/{mode}")
            if row is None or "error" in row:
                lines.append(f"| {mode} | {impl} | error: {row.get('error') if row else 'not run'} |||||||")
                continue
            s = row["summary"]
            c = s["cpu"]
            ratios = " | ".join(
                "" if (x := row.get(k)) is None else f"{x:.2f}×" for k in ("runtime_over_this", "runtime_over_this_cpu")
            )
            lines.append(
                f"| {mode} | {impl} | {s['median']:.2f} | {s['min']:.2f}–{s['max']:.2f} | "
                f"{' / '.join(f'{x:.2f}' for x in s['per_round_median'])} | "
                f"{c['median']:.2f} | {c['min']:.2f}–{c['max']:.2f} | {row['tokens']:,} | "
                f"{'yes' if row['same_ids'] else 'NO'} | {ratios} | "
                f"{s['loadavg_1min'][0]:.1f}–{s['loadavg_1min'][1]:.1f} |"
            )
    lines += ["", *result.get("notes", [])]
    (out / "results.md").write_text("\n".join(lines).rstrip() + "\n")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "peer":
        p = argparse.ArgumentParser(prog="tokenizer_speed.py peer")
        p.add_argument("impl", choices=("tiktoken", "hf"))
        p.add_argument("--mode", choices=MODES, required=True)
        p.add_argument("--reps", type=int, required=True)
        p.add_argument("--text", type=Path, required=True)
        a = p.parse_args(sys.argv[2:])
        print(json.dumps(peer(a.impl, a.mode, a.reps, a.text)))
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument(
        "--hf-reps", type=int, default=None, help="timed repetitions of the HF rows (default --reps): they are slow"
    )
    p.add_argument("--bench", type=Path, default=ROOT / "build" / "bench" / "tokenize_bench")
    p.add_argument("--out", type=Path, default=None)
    a = p.parse_args()
    text = prepare(a.bench)
    out = a.out or ROOT / "bench" / "results" / f"cpu-{datetime.date.today().isoformat()}-tokenize"
    out.mkdir(parents=True, exist_ok=True)
    reps = {"runtime": a.reps, "tiktoken": a.reps, "hf": a.hf_reps or a.reps}

    def command(impl: str, mode: str) -> tuple[list[str], dict]:
        if impl == "runtime":
            return [str(a.bench), str(ARTIFACT), str(TEXT), "--mode", mode, "--reps", str(reps[impl])], {}
        cmd = [PY, str(Path(__file__).resolve()), "peer", impl, "--mode", mode, "--reps", str(reps[impl])]
        return cmd + ["--text", str(TEXT)], {"PYTHONPATH": aot_env()["PYTHONPATH"]}

    runs: dict[str, list[dict]] = {f"{impl}/{mode}": [] for impl in IMPLS for mode in MODES}
    for r in range(a.rounds):
        order = IMPLS[r % len(IMPLS) :] + IMPLS[: r % len(IMPLS)]
        for mode in MODES:
            for impl in order:
                cmd, env = command(impl, mode)
                row = run_row(cmd, {**ONE_THREAD, **env})
                row["round"] = r
                runs[f"{impl}/{mode}"].append(row)
                shown = row.get("error") or f"median {statistics.median(row['mb_per_s']):.2f} MB/s"
                print(
                    f"round {r + 1}/{a.rounds} {mode:5} {impl:8} {shown}  (load {os.getloadavg()[0]:.1f})", flush=True
                )
    (out / "runs.json").write_text(json.dumps(runs, indent=1) + "\n")  # the raw rows, before anything can fail
    rows = {}
    for key, row_runs in runs.items():
        ok = [x for x in row_runs if "error" not in x]
        if not ok:
            rows[key] = {"error": row_runs[0]["error"], "runs": row_runs}
            continue
        first = ok[0]
        rows[key] = {
            "impl": first["impl"], "mode": first["mode"], "bytes": first["bytes"], "calls": first["calls"],
            "tokens": first["tokens"], "ids_sha256": first["ids_sha256"],
            "ids_stable": all(x["ids_sha256"] == first["ids_sha256"] for x in ok),
            "summary": summarize(ok), "runs": row_runs,
        }  # fmt: skip
    for mode in MODES:  # a row that encodes differently from tiktoken is not comparable: no ratio
        ref = rows.get(f"tiktoken/{mode}", {})
        for impl in IMPLS:
            row = rows[f"{impl}/{mode}"]
            if "error" not in row:
                row["same_ids"] = bool(ref.get("ids_stable") and row["ids_stable"])
                row["same_ids"] = row["same_ids"] and row["ids_sha256"] == ref["ids_sha256"]
        rt = rows[f"runtime/{mode}"]
        for impl in IMPLS[1:]:
            row = rows[f"{impl}/{mode}"]
            if rt.get("same_ids") and row.get("same_ids"):
                row["runtime_over_this"] = rt["summary"]["median"] / row["summary"]["median"]
                row["runtime_over_this_cpu"] = rt["summary"]["cpu"]["median"] / row["summary"]["cpu"]["median"]
    niceness = os.nice(0)
    cmdline = (
        (f"nice -n {niceness} " if niceness else "")
        + ".venv/bin/python bench/tokenizer_speed.py "
        + " ".join(sys.argv[1:])
    )
    result = {
        "machine": machine(), "text": text, "rounds": a.rounds, "reps": reps, "command": cmdline.strip(),
        "artifact": str(ARTIFACT.relative_to(ROOT)), "rows": rows,
    }  # fmt: skip
    (out / "results.json").write_text(json.dumps(result, indent=1) + "\n")
    write_markdown(out, result)
    print((out / "results.md").read_text())


if __name__ == "__main__":
    main()
