"""Where one decode step's time goes, op by op (issue #45's per-op profile).

    .venv/bin/python bench/step_profile.py [--rows 1] [--context 128] [--linear kernel] [--attention math]
                                           [--quantize int4|int8] [--steps 64] [--threads 2] [--out DIR]

GPT-2 124M (nanoGPT's initialisation, bf16) decodes `--steps` steps of `--rows` sequences over a
cache filled to `--context`, as Inductor compiles the decode graph (torch.compile, the code generator
AOTInductor uses for the artifacts), with Inductor's per-kernel profiling on: each generated C++ loop
and each library call (the kernel library's linear and decode attention among them) is one row of
PyTorch's profiler. Prints and writes (profile.txt) the ops by self time with their share of the
step, the linears' share, and the weight-read roofline: the bytes every step reads whatever the rows
(every linear's weight, the tied embedding as the head) over `--bandwidth` GB/s when given.
"""

import argparse
import os
import time
from pathlib import Path

os.environ["TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE"] = "1"  # read when Inductor's config is imported

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from gpt_aot.model import kernels, quantize  # noqa: E402
from gpt_aot.model.attention import attention_context  # noqa: E402
from gpt_aot.model.gpt import GPT, GPTConfig, layer_caches  # noqa: E402

GPT2 = dict(block_size=1024, n_layer=12, n_head=12, n_embd=768, bias=True, vocab_size=50257, gelu="tanh")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1)
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--linear", default="kernel")
    parser.add_argument("--attention", default="math")
    parser.add_argument(
        "--quantize", choices=("int4", "int8"), help="the linears' weights quantized (int4: groups of 32)"
    )
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--bandwidth", type=float, default=0.0, help="read bandwidth, GB/s, for the roofline line")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.linear == "kernel" or args.attention == "chunked":
        kernels.load()

    model = GPT(GPTConfig(**GPT2), attention="math").init_weights(1337).to(torch.bfloat16).eval()
    if args.quantize == "int4":
        quantize.quantize_int4(model, torch.bfloat16)
    elif args.quantize == "int8":
        quantize.quantize_int8(model, torch.bfloat16)
    model.set_linear_form(args.linear)
    rows, n, steps = args.rows, args.context, args.steps
    gen = torch.Generator().manual_seed(0)
    idx = torch.randint(0, GPT2["vocab_size"], (rows, n + steps), generator=gen)
    kv = model.new_kv_cache(rows)
    with torch.no_grad():
        model.prefill(idx[:, :n], kv)
    model.set_attention(args.attention)
    caches = layer_caches(kv, n + steps)
    positions = [torch.full((rows,), n + i) for i in range(steps)]
    decode = torch.compile(model.decode, dynamic=False)

    def run():
        with torch.no_grad(), attention_context(model.attention):
            for i in range(steps):
                decode(idx[:, n + i : n + i + 1], positions[i], caches)

    run()  # compiles
    run()
    start = time.perf_counter()
    run()
    step_ms = (time.perf_counter() - start) * 1e3 / steps
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        run()
    events = [e for e in prof.key_averages() if e.self_cpu_time_total > 0]
    events.sort(key=lambda e: e.self_cpu_time_total, reverse=True)
    total_us = sum(e.self_cpu_time_total for e in events)

    weight_bytes = quantize.weight_bytes(model, torch.bfloat16)
    lines = [
        f"GPT-2 124M {args.quantize or 'bf16'}, {rows} row(s), context {n}, linear {args.linear}, "
        f"attention {args.attention}, "
        f"{args.threads} threads, {steps} steps",
        f"step (unprofiled): {step_ms:.2f} ms; profiled ops' self time per step: {total_us / steps / 1e3:.2f} ms",
        f"weights read per step: {weight_bytes / 1e6:.1f} MB",
    ]
    if args.bandwidth:
        roof = weight_bytes / (args.bandwidth * 1e9) * 1e3
        lines.append(f"weight-read roofline at {args.bandwidth} GB/s: {roof:.2f} ms = {roof / step_ms:.0%} of the step")
    linear_us = sum(e.self_cpu_time_total for e in events if "linear" in e.key)
    lines.append(f"linears' share of the ops' time: {linear_us / total_us:.0%}")
    lines.append("")
    lines.append(f"{'op':<72} {'calls/step':>10} {'us/step':>9} {'us/call':>8} {'share':>6}")
    for e in events[:40]:
        per_step = e.self_cpu_time_total / steps
        lines.append(
            f"{e.key[:72]:<72} {e.count / steps:>10.1f} {per_step:>9.1f} {e.self_cpu_time_total / e.count:>8.1f} "
            f"{e.self_cpu_time_total / total_us:>6.1%}"
        )
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        name = f"profile-r{rows}-c{n}-{args.quantize or 'bf16'}-{args.linear}-{args.attention}.txt"
        (args.out / name).write_text(text + "\n")


if __name__ == "__main__":
    main()
