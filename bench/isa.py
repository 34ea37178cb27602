"""Portable vs native CPU code: one model compiled once per `--isa` level, then
runtime_bench's generate rows for each artifact, levels alternating round by
round so drift on the host falls on every level alike.

    .venv/bin/python bench/isa.py --out bench/results/cpu-DATE-isa [--levels native x86-64-v3]

Needs build/bench/runtime_bench (scripts/build.sh --target runtime_bench).
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "build" / "bench" / "runtime_bench"
MODEL = [
    "--config",
    "char-small",
    "--set",
    "n_layer=6",
    "--set",
    "n_head=6",
    "--set",
    "n_embd=384",
    "--set",
    "block_size=256",
    "--set",
    "vocab_size=65",
    "--seed",
    "1337",
]
FORMS = ["--attention", "flash", "--decode-linear", "reduction", "--batched-linear", "onednn", "--max-batch", "8"]


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def compile_level(level: str, work: Path) -> float:
    out = work / f"isa-{level}"
    if (out / "cpu" / "manifest.json").exists():
        return 0.0
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "gpt_aot", "compile", *MODEL, *FORMS, "--isa", level, "-o", str(out)],
        check=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT / "aot")},
    )
    return time.perf_counter() - t0


def run_row(artifact: Path, batch: int, cpu: int) -> dict:
    cmd = [
        "taskset",
        "-c",
        str(cpu),
        str(BENCH),
        "generate",
        str(artifact),
        "--threads",
        "1",
        "--batch",
        str(batch),
        "--context",
        "128",
        "--tokens",
        "32",
        "--reps",
        "5",
    ]
    done = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(done.stdout)


def median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--levels", nargs="+", default=["native", "x86-64-v3"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cpu", type=int, default=0, help="the core every row is pinned to")
    args = parser.parse_args()
    work = ROOT / "bench" / "work"
    work.mkdir(parents=True, exist_ok=True)
    compile_s = {level: compile_level(level, work) for level in args.levels}
    rows = []
    for rnd in range(1, args.rounds + 1):
        for batch in (1, 8):
            for level in args.levels:
                load = os.getloadavg()[0]
                result = run_row(work / f"isa-{level}", batch, args.cpu)
                rows.append({"round": rnd, "level": level, "batch": batch, "load": f"{load:.2f}", "result": result})
                print(
                    f"round {rnd} batch {batch} {level}: decode min {min(result['decode_ms_per_token']):.2f} ms",
                    flush=True,
                )
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    report = {
        "machine": cpu_name(),
        "torch": torch.__version__,
        "commit": commit.stdout.strip(),
        "model": " ".join(MODEL),
        "compile": " ".join(FORMS),
        "compile_s": compile_s,
        "command": f"taskset -c {args.cpu} runtime_bench generate ART --threads 1 --batch B --context 128 "
        "--tokens 32 --reps 5",
        "rows": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(report, indent=1) + "\n")
    lines = [
        "| batch | isa | decode ms/step, min | median of all reps | median per round | prefill ms, min |",
        "|---|---|---|---|---|---|",
    ]
    for batch in (1, 8):
        for level in args.levels:
            mine = [r for r in rows if r["batch"] == batch and r["level"] == level]
            decode = [d for r in mine for d in r["result"]["decode_ms_per_token"]]
            per_round = " / ".join(f"{median(r['result']['decode_ms_per_token']):.2f}" for r in mine)
            prefill = min(p for r in mine for p in r["result"]["prefill_ms"])
            lines.append(
                f"| {batch} | {level} | {min(decode):.2f} | {median(decode):.2f} | {per_round} | {prefill:.0f} |"
            )
    same = len({json.dumps(r["result"]["tokens"]) for r in rows if r["batch"] == 1}) == 1
    lines.append("")
    lines.append(f"Greedy tokens identical across levels (batch 1): {same}. Load average per row in results.json.")
    (args.out / "table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
