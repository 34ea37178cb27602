"""Measuring the choices of one model setting (its attention kind, its linears'
form) on the model's own shapes, and picking the fastest correct one.

Each choice that has a kernel on the device runs the same inputs; its result is
checked against a reference choice's and timed. attention_pick and linear_pick
say what to run and which choices to try.
"""

import time

import torch

from gpt_aot.model.attention import attention_context, attention_runs_on
from gpt_aot.model.gpt import GPT, layer_caches
from gpt_aot.model.linear import linear_form_runs_on

TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 5e-2, torch.float16: 1e-2}


def time_ms(fn, repeats: int) -> float:
    """Median wall time of `fn()` in milliseconds, the GPU synchronised around each run."""
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


def tokens(model: GPT, seq: int | None, rows: int) -> list[torch.Tensor]:
    """`rows` fixed random (1, seq) token sequences on the model's device."""
    gen = torch.Generator().manual_seed(0)
    shape = (1, seq or model.config.block_size)
    device = model.lm_head.weight.device
    return [torch.randint(0, model.config.vocab_size, shape, generator=gen).to(device) for _ in range(rows)]


def each_choice(
    model: GPT, setting: str, choices: tuple, reference: str, run, repeats: int, attention_call: str = "causal"
) -> dict:
    """{choice: {"runs", "ms", "max_abs_err"}}: `run(model)` (a list of tensors)
    with the model's `setting` ("attention" or "linear_form") at each choice,
    against its result at `reference`. A choice without a kernel here (for
    attention: for `attention_call`, the call `run` makes) is recorded as not
    running."""
    weight = model.lm_head.weight  # int8 when quantized: the linear forms depend on it, attention on model.dtype
    use = getattr(model, f"set_{setting}")
    saved = getattr(model, setting)
    use(reference)
    expected = [t.float() for t in run(model)]
    results = {}
    for choice in choices:
        runs_here = (
            attention_runs_on(choice, weight.device, model.dtype, attention_call)
            if setting == "attention"
            else linear_form_runs_on(choice, weight.device, weight.dtype)
        )
        if not runs_here:
            results[choice] = {"runs": False}
            continue
        use(choice)
        try:
            out = run(model)  # warm-up and correctness
        except RuntimeError as e:  # a kernel that refuses these shapes (e.g. has no backward for them)
            results[choice] = {"runs": False, "error": str(e).splitlines()[0]}
            continue
        err = max((o.float() - r).abs().max().item() for o, r in zip(out, expected, strict=True))
        ms = time_ms(lambda: run(model), repeats)
        results[choice] = {"runs": True, "ms": round(ms, 4), "max_abs_err": err}
    use(saved)
    return results


def each_choice_decoding(
    model: GPT,
    setting: str,
    choices: tuple,
    reference: str,
    steps: int,
    repeats: int,
    rows: int = 1,
    compiled: bool = True,
) -> dict:
    """`steps` decode steps of `rows` sequences over a cache filled to half the
    context, as Inductor compiles them (or eagerly), for each choice of
    `setting` (each_choice)."""
    n = max(1, model.config.block_size // 2)
    steps = min(steps, model.config.block_size - n)
    idx = torch.cat(tokens(model, n + steps, rows))
    positions = [torch.full((rows,), n + i, device=idx.device) for i in range(steps)]
    kv = model.new_kv_cache(rows)
    caches = layer_caches(kv, n + steps)  # as the graphs take it: views of the positions read, updated in place
    saved = model.attention
    # torch.compile guards on the setting: one compile per choice.
    decode = torch.compile(model.decode, dynamic=False) if compiled else model.decode

    def run(m):
        with attention_context(m.attention):
            # Each run rewrites the same cache positions before reading them: runs are interchangeable.
            return [decode(idx[:, n + i : n + i + 1], positions[i], caches) for i in range(steps)]

    with torch.no_grad():
        model.set_attention("math")
        model.prefill(idx[:, :n], kv)
        model.set_attention(saved)
        try:
            return each_choice(model, setting, choices, reference, run, repeats, attention_call="masked")
        finally:
            torch._dynamo.reset()


def pick(candidates: dict, dtype: torch.dtype) -> str:
    """Fastest choice whose error against the reference is within the dtype's
    tolerance. `naive` (attention) is a reference only: it is picked only if
    nothing else runs."""
    tol = TOLERANCE[dtype]
    ok = {k: c for k, c in candidates.items() if c.get("runs") and c["max_abs_err"] <= tol and k != "naive"}
    if not ok:
        return "naive"
    return min(ok, key=lambda k: ok[k]["ms"])
