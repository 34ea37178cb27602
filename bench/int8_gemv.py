"""Where int8 decode's time goes: one GPT-2 124M linear at one row, int8 weights, in the forms Inductor
can generate, against bf16's linear (issue #27's profile).

    .venv/bin/python bench/int8_gemv.py [--threads 2] [--out FILE]

Each form is torch.compile'd alone (the Python call costs some tens of µs: the small shapes are
understated) and timed over 30 calls after 5; GB/s is the int8 weight's bytes (bf16's for the bf16 row)
over the time.
- reduction: the artifact's int8 `reduction` form, (x · W.to(bf16)).sum(-1) · scale over W (N, K).
- reduction-fp32: the same with x and W converted to fp32 first.
- blocked-B: W stored as (N/B, K, B), the reduction over K with B output rows in each vector: no horizontal
  sum per row, every load a run of B int8 weights.
- int8pack: aten's _weight_int8pack_mm (the `int8pack` form); bf16 linear: aten's linear on bf16 weights.
"""

import argparse
import json
import sys
import time

import torch


def ms(fn, n: int = 30) -> float:
    for _ in range(5):
        fn()
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n * 1e3


@torch.compile(dynamic=False)
def reduction(x, q, s):
    return (x.unsqueeze(-2) * q.to(x.dtype)).sum(-1) * s


@torch.compile(dynamic=False)
def reduction_fp32(x, q, s):
    return (x.float().unsqueeze(-2) * q.float()).sum(-1).to(x.dtype) * s


@torch.compile(dynamic=False)
def blocked(x, qb, s):
    nb, k, b = qb.shape
    return (x.view(1, k, 1).float() * qb.float()).sum(1).reshape(1, nb * b).to(x.dtype) * s


LINEARS = [(2304, 768, "c_attn"), (3072, 768, "mlp.c_fc"), (768, 3072, "mlp.c_proj"), (50304, 768, "lm_head")]


def time_forms(n: int, k: int) -> dict:
    """ms of each form for one (n, k) linear at one row."""
    w = torch.randn(n, k, generator=torch.Generator().manual_seed(0))
    s = (w.abs().amax(1) / 127).to(torch.bfloat16)
    q = torch.round(w / s.float()[:, None]).clamp(-127, 127).to(torch.int8)
    x = torch.randn(1, k, dtype=torch.bfloat16)
    wb = w.to(torch.bfloat16)
    times = {"reduction": ms(lambda: reduction(x, q, s)), "reduction-fp32": ms(lambda: reduction_fp32(x, q, s))}
    for b in (16, 32):
        qb = q.view(n // b, b, k).transpose(1, 2).contiguous()
        times[f"blocked-{b}"] = ms(lambda qb=qb: blocked(x, qb, s))
    times["int8pack"] = ms(lambda: torch._weight_int8pack_mm(x, q, s))
    times["bf16 linear"] = ms(lambda: torch.nn.functional.linear(x, wb))
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    rows = []
    for n, k, what in LINEARS:
        for form, t in time_forms(n, k).items():
            weight_bytes = n * k * (2 if form == "bf16 linear" else 1)
            rows.append({"linear": what, "shape": [n, k], "form": form, "ms": t, "GB/s": weight_bytes / t / 1e6})
            print(f"{what:10} {form:15} {t:7.3f} ms {weight_bytes / t / 1e6:6.1f} GB/s", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"threads": args.threads, "torch": torch.__version__, "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
