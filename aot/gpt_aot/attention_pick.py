"""Pick the attention kernel for a target by measuring it.

Every kind that has a kernel for the device runs the model at its own shapes:
the prefill for inference, forward + backward of the loss for training. Results
(logits, or every gradient) are checked against the math backend and the
fastest correct kind wins. All candidates are returned so the manifest can say why.
"""

import time

import torch

from .attention import ATTENTION_KINDS, attention_runs_on
from .model import GPT

TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 5e-2, torch.float16: 1e-2}


def _prefill_once(model: GPT, idx: torch.Tensor) -> torch.Tensor:
    kv = model.new_kv_cache(idx.shape[0])
    return model.prefill(idx, kv)


def _time_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return sorted(times)[len(times) // 2]


def measure(model: GPT, seq: int | None = None, repeats: int = 5) -> dict:
    """{kind: {"runs", "ms", "max_abs_err"}} for every attention kind."""
    weight = model.lm_head.weight
    seq = seq or model.config.block_size
    gen = torch.Generator().manual_seed(0)
    idx = torch.randint(0, model.config.vocab_size, (1, seq), generator=gen).to(weight.device)
    saved = model.attention
    results = {}
    with torch.no_grad():
        model.set_attention("math")
        reference = _prefill_once(model, idx).float()
        for kind in ATTENTION_KINDS:
            if not attention_runs_on(kind, weight.device, weight.dtype):
                results[kind] = {"runs": False}
                continue
            model.set_attention(kind)
            out = _prefill_once(model, idx)  # warm-up and correctness
            err = (out.float() - reference).abs().max().item()
            ms = _time_ms(lambda: _prefill_once(model, idx), repeats)
            results[kind] = {"runs": True, "ms": round(ms, 4), "max_abs_err": err}
    model.set_attention(saved)
    return results


def _gradients(model: GPT, x: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
    model.zero_grad(set_to_none=True)
    _, loss = model(x, y)
    loss.backward()
    return [p.grad.float() for p in model.parameters() if p.grad is not None]


def measure_training(model: GPT, seq: int | None = None, repeats: int = 3) -> dict:
    """{kind: {"runs", "ms", "max_abs_err"}}: one forward + backward of the loss
    (batch 1, `seq` tokens, dropout off) per kind, every gradient against math's."""
    weight = model.lm_head.weight
    seq = seq or model.config.block_size
    gen = torch.Generator().manual_seed(0)
    x, y = (torch.randint(0, model.config.vocab_size, (1, seq), generator=gen).to(weight.device) for _ in "xy")
    saved_attention, saved_mode = model.attention, model.training
    model.eval()  # dropout off: gradients of every kind are comparable
    model.set_attention("math")
    reference = _gradients(model, x, y)
    results = {}
    for kind in ATTENTION_KINDS:
        if not attention_runs_on(kind, weight.device, weight.dtype):
            results[kind] = {"runs": False}
            continue
        model.set_attention(kind)
        try:
            grads = _gradients(model, x, y)  # warm-up and correctness
        except RuntimeError as e:  # a forward kernel without a backward for these shapes
            results[kind] = {"runs": False, "error": str(e).splitlines()[0]}
            continue
        err = max((g - r).abs().max().item() for g, r in zip(grads, reference, strict=True))
        ms = _time_ms(lambda: _gradients(model, x, y), repeats)
        results[kind] = {"runs": True, "ms": round(ms, 4), "max_abs_err": err}
    model.zero_grad(set_to_none=True)
    model.set_attention(saved_attention)
    model.train(saved_mode)
    return results


def pick(candidates: dict, dtype: torch.dtype) -> str:
    """Fastest kind whose error against math is within the dtype's tolerance.
    `naive` is a reference only: it is picked only if nothing else runs."""
    tol = TOLERANCE[dtype]
    ok = {k: c for k, c in candidates.items() if c.get("runs") and c["max_abs_err"] <= tol and k != "naive"}
    if not ok:
        return "naive"
    return min(ok, key=lambda k: ok[k]["ms"])
