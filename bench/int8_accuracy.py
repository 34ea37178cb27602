"""int8 and int4 against bf16 on a trained BPE model larger than the demo's (issue #27's accuracy report).

    .venv/bin/python bench/int8_accuracy.py [--tokens 4096] [--layers 6] [--embd 384] [--block 256]
        [--steps 600] [--out DIR]

The corpus as a byte-level BPE dataset (`gpt_aot prepare-data --tokenizer bpe:N`, into bench/work/int8/), a
GPT-2-architecture model (bias, tanh GELU) trained on it in fp32 with nanoGPT's recipe for --steps steps,
then the validation loss of the same weights in fp32, bf16, int8 and int4 in groups of 32 (bf16 activations,
scales and zeros) and the greedy tokens of bf16 and each quantization over 256 tokens
(tests/fixtures/int8_accuracy.py; the test suite does the same for the README demo's char model). Writes
results.json and results.md to bench/results/cpu-<date>-quantized-accuracy/ (or --out).
"""

import argparse
import datetime
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fixtures"))

import int8_accuracy  # noqa: E402

from gpt_aot.importers.tokenizer_import import read_tokenizer  # noqa: E402
from gpt_aot.model.gpt import GPTConfig  # noqa: E402
from gpt_aot.text import bpe_data  # noqa: E402
from gpt_aot.text.tokenizer import encode  # noqa: E402

PROMPT = "And God said"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=4096, help="BPE vocabulary size")
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--heads", type=int, default=6)
    parser.add_argument("--embd", type=int, default=384)
    parser.add_argument("--block", type=int, default=256)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    data = ROOT / "bench" / "work" / "int8" / f"bible_bpe{args.tokens}"
    if not (data / "val.bin").exists():
        bpe_data.prepare(data, args.tokens)
    train = np.fromfile(data / "train.bin", dtype=np.uint16)
    val = np.fromfile(data / "val.bin", dtype=np.uint16)
    tokenizer = read_tokenizer(data / "tokenizer.json")  # the dataset's HF tokenizer.json, in canonical form
    config = GPTConfig(
        block_size=args.block,
        vocab_size=args.tokens,
        n_layer=args.layers,
        n_head=args.heads,
        n_embd=args.embd,
        bias=True,
        gelu="tanh",
    )
    start = time.perf_counter()
    model = int8_accuracy.train_briefly(config, train, args.steps, batch=args.batch)
    train_seconds = time.perf_counter() - start
    prompt = encode(tokenizer, PROMPT)
    report = int8_accuracy.compare(model, val, prompt)
    params = sum(p.numel() for p in model.parameters())
    result = {
        "config": config.to_dict(),
        "parameters": params,
        "steps": args.steps,
        "batch": args.batch,
        "train_seconds": round(train_seconds, 1),
        "prompt": PROMPT,
        **report,
        "machine": platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip(),
    }
    out = args.out or ROOT / "bench" / "results" / f"cpu-{datetime.date.today()}-quantized-accuracy"
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    losses = report["val_loss"]
    (out / "results.md").write_text(
        f"# int8 and int4 accuracy: BPE model, {params / 1e6:.1f} M parameters\n\n"
        f"{args.layers} layers, {args.heads} heads, {args.embd} wide, context {args.block}, vocabulary {args.tokens} "
        f"(byte-level BPE of the corpus), trained {args.steps} steps of {args.batch} windows in fp32 "
        f"({train_seconds:.0f} s), commit {result['commit']}, torch {torch.__version__}.\n\n"
        "| weights | validation loss |\n|---|---|\n"
        + "".join(f"| {k} | {v:.4f} |\n" for k, v in losses.items())
        + "".join(
            f"\n{scheme} / bf16 = {report[scheme]['over_bf16']:.4f}. Greedy from {PROMPT!r}, 256 tokens: the same "
            f"first {report[scheme]['greedy_same_prefix']} tokens as bf16, {report[scheme]['greedy_same_positions']} "
            "of 256 positions equal.\n"
            for scheme in int8_accuracy.QUANTIZERS
        )
    )
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
