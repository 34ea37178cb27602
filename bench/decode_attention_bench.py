"""The kernel library's decode attention alone (gpt_kernels::decode_attention) against its KV-read time.

    .venv/bin/python bench/decode_attention_bench.py [--threads 2] [--batches 1 8] [--positions 128 1024]

GPT-2 124M's shapes (12 heads of 64, bf16 caches of 1025 positions as the runtime holds them), one call per layer
over 12 layers' separate caches, as a decode step makes them (so each layer's cache comes from memory, not from
the CPU's caches); PyTorch's scaled_dot_product_attention over the same positions beside it; and the kernel over
int8 caches of the same values (compile --kv-dtype int8: 68 bytes a position and head). Prints, per batch and
position count, the median of 15 runs of the 12 calls in ms and the time the KV bytes take at the read bandwidth
bench/suite.py measures (the roofline: each position's key and value read once).
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "aot"))
sys.path.insert(0, str(ROOT / "bench"))

import suite  # noqa: E402

from gpt_aot.model import kernels  # noqa: E402

HEADS, HEAD_SIZE, SLOTS, LAYERS = 12, 64, 1025, 12


def median_ms(call, runs: int = 15) -> float:
    call()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def kernel_calls(caches, q, k, v, pos) -> None:
    """One decode step's attention: each layer's call on its own cache."""
    for k_cache, v_cache in caches:
        torch.ops.gpt_kernels.decode_attention(q, k, v, k_cache, v_cache, pos, HEAD_SIZE**-0.5)


def int8_cache(values: torch.Tensor) -> torch.Tensor:
    """values as an int8 cache holds them (kernels/cpu/kv_row_q8.h): each position rounded against its own scale,
    the scale's fp32 bytes after it."""
    scale = values.float().abs().amax(-1, keepdim=True) / 127
    rounded = (values.float() / scale).round().to(torch.int8)
    return torch.cat([rounded, scale.view(torch.int8)], -1)


def sdpa_calls(caches, q, positions: int) -> None:
    for k_cache, v_cache in caches:
        seen = slice(0, positions)
        torch.nn.functional.scaled_dot_product_attention(q, k_cache[:, :, seen], v_cache[:, :, seen])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--positions", type=int, nargs="+", default=[128, 1024])
    args = ap.parse_args()
    kernels.load()
    torch.set_num_threads(args.threads)
    bandwidth = suite.read_bandwidth("cpu")
    print(f"read bandwidth {bandwidth / 1e9:.1f} GB/s, {args.threads} threads, {torch.__version__}")
    dtype = torch.bfloat16
    for batch in args.batches:
        caches = [
            (
                torch.randn(batch, HEADS, SLOTS, HEAD_SIZE, dtype=dtype),
                torch.randn(batch, HEADS, SLOTS, HEAD_SIZE, dtype=dtype),
            )
            for _ in range(LAYERS)
        ]
        int8_caches = [(int8_cache(k_cache), int8_cache(v_cache)) for k_cache, v_cache in caches]
        for positions in args.positions:
            q, k, v = (torch.randn(batch, HEADS, 1, HEAD_SIZE, dtype=dtype) for _ in range(3))
            pos = torch.full((batch,), positions - 1, dtype=torch.long)

            ms = median_ms(lambda c=caches, a=(q, k, v, pos): kernel_calls(c, *a))
            sdpa_ms = median_ms(lambda c=caches, q=q, n=positions: sdpa_calls(c, q, n))
            int8_ms = median_ms(lambda c=int8_caches, a=(q, k, v, pos): kernel_calls(c, *a))
            kv_bytes = 2 * LAYERS * batch * HEADS * positions * HEAD_SIZE * dtype.itemsize
            roofline = kv_bytes / bandwidth * 1e3
            int8_roofline = roofline * (HEAD_SIZE + 4) / (HEAD_SIZE * dtype.itemsize)
            print(
                f"batch {batch}, {positions} positions: kernel {ms:.3f} ms ({ms / roofline:.2f}× the KV read, "
                f"{kv_bytes / 1e6:.1f} MB in {roofline:.3f} ms), SDPA {sdpa_ms:.3f} ms; int8 cache {int8_ms:.3f} ms "
                f"({int8_ms / int8_roofline:.2f}× its read, {int8_roofline:.3f} ms)",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
