"""One benchmark row run in PyTorch, in its own process: the peers of libgpt_runtime.

  python bench/peers.py train    --mode eager|compile --attention K --config JSON --batches FILE ...
  python bench/peers.py generate --mode eager|compile --attention K --config JSON --context C --tokens T ...

Prints one JSON object on stdout. Training is nanoGPT's loop (AdamW lr 1e-3 with
decay 0.1 on >= 2-D tensors, loss / accum, clipping at 1.0, bf16 autocast on a GPU); generation
is a prefill and greedy decode steps, each with the artifact's kernel for it, over
the same static KV cache the compiled graphs use (each step reads the positions up
to its own, as the runtime's do), with bench/runtime_bench.c's
prompt in every row of the batch.
"""

import argparse
import contextlib
import json
import time

import numpy as np
import torch

from gpt_aot.compiler.target import DTYPES
from gpt_aot.model.gpt import GPT, GPTConfig, layer_caches


def peak_rss_mib() -> float:
    """VmHWM, as bench/peak_rss.h reads it for the C rows (ru_maxrss would include the driver's)."""
    with open("/proc/self/status") as status:
        kib = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    return kib / 1024


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def now_ms(device: torch.device) -> float:
    sync(device)
    return time.perf_counter() * 1e3


def build(args, device) -> GPT:
    config = GPTConfig.from_dict(json.loads(args.config))
    return GPT(config, args.attention).init_weights(args.seed).to(device)


def train(args, device) -> dict:
    model = build(args, device).train()
    forward = torch.compile(model) if args.mode == "compile" else model
    params = list(model.parameters())
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=1e-3, betas=(0.9, 0.95), fused=True)
    autocast = (
        torch.autocast(device_type="cuda", dtype=torch.bfloat16) if device.type == "cuda" else contextlib.nullcontext()
    )
    # The batches bench/suite.py wrote for every row: x then y, (iters, accum, batch, seq) int32 each.
    shape = (args.iters, args.accum, args.batch, args.seq)
    xy = torch.from_numpy(np.fromfile(args.batches, dtype=np.int32).astype(np.int64)).view(2, *shape).to(device)
    times, losses = [], []
    for it in range(args.iters):
        micro = [(xy[0, it, k], xy[1, it, k]) for k in range(args.accum)]
        t0 = now_ms(device)
        total = 0.0
        for x, y in micro:
            with autocast:
                _, loss = forward(x, y)
            (loss / args.accum).backward()
            total += loss.detach()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(now_ms(device) - t0)
        losses.append(float(total) / args.accum)
    peak = torch.cuda.max_memory_allocated() if device.type == "cuda" else None
    return {"iter_ms": times, "loss": losses, "peak_device_bytes": peak}


@torch.no_grad()
def generate(args, device) -> dict:
    model = build(args, device).to(DTYPES[args.dtype]).eval()
    prefill, decode = model.prefill, model.decode
    if args.mode == "compile":
        prefill, decode = torch.compile(model.prefill), torch.compile(model.decode)
    decode_attention = args.decode_attention or args.attention

    def prefill_with_its_kernel(*a):
        model.set_attention(args.attention)
        return prefill(*a)

    def decode_with_its_kernel(*a):
        model.set_attention(decode_attention)
        return decode(*a)

    vocab = model.config.vocab_size
    prompt = torch.tensor([[(i * 7 + 3) % vocab for i in range(args.context)]], device=device).repeat(args.batch, 1)
    prefill_ms, decode_ms, tokens = [], [], []
    for _ in range(args.reps):
        kv = model.new_kv_cache(args.batch)
        t0 = now_ms(device)
        logits = prefill_with_its_kernel(prompt, layer_caches(kv, model.config.block_size))
        t1 = now_ms(device)
        tokens = []
        next_token = logits[:, :vocab].argmax(-1, keepdim=True)
        for i in range(args.tokens):
            tokens.append(int(next_token[0, 0]))
            pos = torch.full((args.batch,), args.context + i, device=device)
            # As the runtime calls its graphs: views of the positions up to this step's.
            logits = decode_with_its_kernel(next_token, pos, layer_caches(kv, args.context + i + 1))
            next_token = logits[:, :vocab].argmax(-1, keepdim=True)
        t2 = now_ms(device)
        prefill_ms.append(t1 - t0)
        decode_ms.append((t2 - t1) / args.tokens)
    return {"prefill_ms": prefill_ms, "decode_ms_per_token": decode_ms, "tokens": tokens}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=["train", "generate"])
    p.add_argument("--mode", choices=["eager", "compile"], required=True)
    p.add_argument("--attention", required=True, help="generate: the prefill's kind (and the decode's by default)")
    p.add_argument("--decode-attention", help="generate: the decode's kind")
    p.add_argument("--config", required=True, help="GPTConfig as JSON")
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="fp32", help="generate: the weights' dtype (fp32, bf16)")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--batches", help="bench/suite.py's training batches")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--accum", type=int, default=1)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--context", type=int, default=128)
    p.add_argument("--tokens", type=int, default=32)
    p.add_argument("--reps", type=int, default=3)
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    row = train(args, device) if args.what == "train" else generate(args, device)
    print(json.dumps({**row, "peak_rss_mib": peak_rss_mib()}))


if __name__ == "__main__":
    main()
