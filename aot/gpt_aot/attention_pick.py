"""Pick the attention kernel, and the form of each inference graph's linears,
for a target by measuring them.

Every kind that has a kernel for the device runs the model at its own shapes:
the prefill, decode steps over a half-full cache, forward + backward of the loss
for training; each graph gets its own pick. Results
(logits, or every gradient) are checked against the math backend and the
fastest correct kind wins; the linear forms are checked against mm. All
candidates are returned so the manifest can say why.
"""

import time
from contextlib import nullcontext

import torch

from .attention import ATTENTION_KINDS, attention_context, attention_runs_on
from .model import GPT, layer_caches, linear_form_runs_on, packed_linear_weights

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


def _tokens(model: GPT, seq: int | None, rows: int) -> list[torch.Tensor]:
    """`rows` fixed random (1, seq) token sequences on the model's device."""
    gen = torch.Generator().manual_seed(0)
    shape = (1, seq or model.config.block_size)
    device = model.lm_head.weight.device
    return [torch.randint(0, model.config.vocab_size, shape, generator=gen).to(device) for _ in range(rows)]


def _each_choice(model: GPT, setting: str, choices: tuple, reference: str, run, repeats: int) -> dict:
    """{choice: {"runs", "ms", "max_abs_err"}}: `run(model)` (a list of tensors)
    with the model's `setting` ("attention" or "linear_form") at each choice,
    against its result at `reference`. A choice without a kernel here is
    recorded as not running."""
    weight = model.lm_head.weight
    use = getattr(model, f"set_{setting}")
    saved = getattr(model, setting)
    use(reference)
    expected = [t.float() for t in run(model)]
    results = {}
    for choice in choices:
        runs_here = (
            attention_runs_on(choice, weight.device, weight.dtype)
            if setting == "attention"
            else linear_form_runs_on(choice, weight.device)
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
        ms = _time_ms(lambda: run(model), repeats)
        results[choice] = {"runs": True, "ms": round(ms, 4), "max_abs_err": err}
    use(saved)
    return results


def _each_kind(model: GPT, run, repeats: int) -> dict:
    return _each_choice(model, "attention", ATTENTION_KINDS, "math", run, repeats)


def measure(model: GPT, seq: int | None = None, repeats: int = 5) -> dict:
    """Every kind's prefill of `seq` tokens (batch 1), logits against math's."""
    (idx,) = _tokens(model, seq, 1)
    with torch.no_grad():
        return _each_kind(model, lambda m: [_prefill_once(m, idx)], repeats)


def _measure_decode(
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
    `setting` (_each_choice)."""
    n = max(1, model.config.block_size // 2)
    steps = min(steps, model.config.block_size - n)
    idx = torch.cat(_tokens(model, n + steps, rows))
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
            return _each_choice(model, setting, choices, reference, run, repeats)
        finally:
            torch._dynamo.reset()


def measure_decode(model: GPT, steps: int = 4, repeats: int = 5) -> dict:
    """Every attention kind's decode, logits against math's. Compiled, not eager:
    one query over the whole cache is where Inductor's fusion decides the winner
    (eager math runs as separate ops and loses to flash on CPU; fused, it wins)."""
    return _measure_decode(model, "attention", ATTENTION_KINDS, "math", steps, repeats)


def measure_decode_linear(
    model: GPT, forms: tuple = ("mm", "reduction"), rows: int = 1, steps: int = 4, repeats: int = 5
) -> dict:
    """Each linear form's decode of `rows` sequences (model.Linear), with the
    model's attention, logits against mm's. Compiled when a reduction is among
    `forms` (it is Inductor's code); the matrix products alone run eagerly: each
    is one library call, compiled or not, and Inductor compiles oneDNN's linear
    only into a graph whose weights are constants (AOTInductor's are; a
    torch.compile'd module's are not). oneDNN's runs on packed weights, as the
    runtime binds them."""
    compiled = "reduction" in forms
    if compiled and "onednn" in forms:
        raise ValueError("the reduction is measured compiled and oneDNN's linear eagerly: measure them apart")
    with packed_linear_weights(model) if "onednn" in forms else nullcontext():
        return _measure_decode(model, "linear_form", forms, "mm", steps, repeats, rows, compiled)


def _gradients(model: GPT, x: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
    model.zero_grad(set_to_none=True)
    _, loss = model(x, y)
    loss.backward()
    return [p.grad for p in model.parameters() if p.grad is not None]


def measure_training(model: GPT, seq: int | None = None, repeats: int = 3) -> dict:
    """Every kind's forward + backward of the loss (batch 1, `seq` tokens, dropout
    off), every gradient against math's."""
    x, y = _tokens(model, seq, 2)
    saved_mode = model.training
    model.eval()  # dropout off: gradients of every kind are comparable
    try:
        return _each_kind(model, lambda m: _gradients(m, x, y), repeats)
    finally:
        model.zero_grad(set_to_none=True)
        model.train(saved_mode)


def pick(candidates: dict, dtype: torch.dtype) -> str:
    """Fastest kind whose error against math is within the dtype's tolerance.
    `naive` is a reference only: it is picked only if nothing else runs."""
    tol = TOLERANCE[dtype]
    ok = {k: c for k, c in candidates.items() if c.get("runs") and c["max_abs_err"] <= tol and k != "naive"}
    if not ok:
        return "naive"
    return min(ok, key=lambda k: ok[k]["ms"])
