"""Measuring the choices of one model setting (its attention kind, its linears'
form) on the model's own shapes, and picking the fastest correct one.

Each choice that has a kernel on the device runs the same inputs; its result is
checked against a reference choice's and timed. attention_pick and linear_pick
say what to run and which choices to try.
"""

import statistics
import tempfile
import time
import warnings
from pathlib import Path

import torch

from gpt_aot.compiler.graphs import export_graphs
from gpt_aot.compiler.inductor import compile_package
from gpt_aot.compiler.target import Target
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
    """{choice: {"runs", "ms", "max_abs_err", "reference_max_abs"}}: `run(model)` (a list of tensors)
    with the model's `setting` ("attention" or "linear_form") at each choice,
    against its result at `reference`, whose largest magnitude is reference_max_abs. A choice without a kernel here (for
    attention: for `attention_call`, the call `run` makes) is recorded as not
    running."""
    weight = model.lm_head.weight  # int8 when quantized: the linear forms depend on it, attention on model.dtype
    use = getattr(model, f"set_{setting}")
    saved = getattr(model, setting)
    use(reference)
    expected = [t.float() for t in run(model)]
    scale = max(t.abs().max().item() for t in expected)
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
        results[choice] = {"runs": True, "ms": round(ms, 4), "max_abs_err": err, "reference_max_abs": scale}
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
        # The positions read, updated in place, each layer's k and v a tensor of its own: torch.compile hands an
        # operator that writes into a strided view of a larger tensor (the chunked kernel's cache, as the graphs
        # take it) memory it never filled, and every form's logits came out NaN (AOTInductor's graphs are right).
        caches = [c.contiguous() for c in layer_caches(kv, n + steps)]
        try:
            return each_choice(model, setting, choices, reference, run, repeats, attention_call="masked")
        finally:
            torch._dynamo.reset()


# A candidate whose repeated timings spread wider than this (interquartile range over median) was measured on
# a busy host: the compile warns that its pick may not hold.
BUSY_SPREAD = 0.25


def _bound_decode_package(model: GPT, kind: str, target: Target, directory: Path):
    """decode (rows 1..max) with the attention `kind` and mm linears, as AOTInductor compiles it for `target`,
    loaded and bound to the model's own weights."""
    program = export_graphs(model, {"prefill": kind, "decode": kind}, max_batch=8, only=("decode",))["decode"]
    package = directory / f"decode-{kind}.pt2"
    compile_package(program, package, target, kind)
    graph = torch._inductor.aoti_load_package(str(package))
    weights = dict(model.named_parameters(remove_duplicate=False)) | dict(model.named_buffers())
    graph.load_constants({n: weights[n] for n in graph.get_constant_fqns()}, check_full_update=True, user_managed=True)
    return graph


def each_kind_compiled_decoding(
    model: GPT, target: Target, kinds: tuple, reference: str, spans: tuple, rows: tuple, repeats: int, steps: int = 2
) -> dict:
    """{kind: {"runs", "ms", "relative", "ms_by_setting", "spread", "max_abs_err"}}: each attention kind's decode graph,
    compiled by AOTInductor exactly as an artifact's (mm linears), timed on what it will serve: `steps` decode
    steps of each number of `rows` over a cache filled to each of `spans` positions. Rounds alternate the kinds
    so that a change in the host's load falls on all of them; each setting's time is its median over
    `repeats` rounds, "ms" their sum, and "relative" the geometric mean over the settings of its time over
    `reference`'s (what pick compares: each setting counts alike, where a sum would be decided by the slowest,
    the eight rows over a full cache). "spread" is the widest interquartile range over median of any setting:
    above BUSY_SPREAD the host was busy and a warning says so. Logits are compared with `reference`'s at every
    setting."""
    spans = tuple(dict.fromkeys(min(s, model.config.block_size) for s in spans))
    gen = torch.Generator().manual_seed(0)
    device = model.lm_head.weight.device
    settings = [(r, s) for r in rows for s in spans]
    caches = {}  # one cache of random keys and values per row count: the time does not depend on them
    for r in rows:
        c = model.config
        shape = (c.n_layer, 2, r, c.n_head, c.block_size + 1, c.head_dim)
        caches[r] = (torch.randn(shape, generator=gen) * 0.5).to(device=device, dtype=model.dtype)
    tokens = {r: torch.randint(0, model.config.vocab_size, (steps, r, 1), generator=gen).to(device) for r in rows}
    saved_attention, saved_form = model.attention, model.linear_form
    results, graphs, outputs = {}, {}, {}

    def run(kind, setting):  # each step rewrites position span - 1 of every row: runs are interchangeable
        r, span = setting
        pos = torch.full((r,), span - 1, device=device)
        return [graphs[kind](tokens[r][i], pos, layer_caches(caches[r], span)) for i in range(steps)]

    with tempfile.TemporaryDirectory() as work, torch.no_grad():
        try:
            for kind in dict.fromkeys((reference, *kinds)):
                if not attention_runs_on(kind, device, model.dtype, "masked"):
                    results[kind] = {"runs": False}
                    continue
                model.set_attention(kind)
                try:
                    graphs[kind] = _bound_decode_package(model, kind, target, Path(work))
                    # Warm-up and correctness; a kernel that compiles but refuses these shapes is not a candidate.
                    outputs[kind] = {setting: [t.float() for t in run(kind, setting)] for setting in settings}
                except RuntimeError as e:
                    graphs.pop(kind, None)
                    results[kind] = {"runs": False, "error": str(e).splitlines()[0]}
        finally:
            model.set_attention(saved_attention)
            model.set_linear_form(saved_form)
        if reference not in graphs:
            raise RuntimeError(f"the reference attention {reference!r} does not run decode here: {results[reference]}")
        times = {kind: {setting: [] for setting in settings} for kind in graphs}
        for _ in range(repeats):
            for kind in graphs:
                for setting in settings:
                    times[kind][setting].append(time_ms(lambda k=kind, st=setting: run(k, st), 1))
    for kind in graphs:
        err = max(
            (o - r).abs().max().item()
            for setting in settings
            for o, r in zip(outputs[kind][setting], outputs[reference][setting], strict=True)
        )
        by_setting, spread = {}, 0.0
        for (r, s), ts in times[kind].items():
            median = statistics.median(ts)
            q = statistics.quantiles(ts, n=4, method="inclusive") if len(ts) > 1 else [median] * 3
            spread = max(spread, (q[2] - q[0]) / median)
            by_setting[f"rows {r}, span {s}"] = round(median, 4)
        results[kind] = {
            "runs": True,
            "ms": round(sum(by_setting.values()), 4),
            "relative": None,  # once the reference's times are known, below
            "ms_by_setting": by_setting,
            "spread": round(spread, 3),
            "max_abs_err": err,
        }
        if spread > BUSY_SPREAD:
            warnings.warn(
                f"attention {kind}'s decode timings spread by {spread:.0%} (interquartile range over median): the "
                "host was busy while measuring, and the pick may not hold on a quiet one",
                stacklevel=2,
            )
    base = results[reference]["ms_by_setting"]
    for kind in graphs:
        own = results[kind]["ms_by_setting"]
        results[kind]["relative"] = round(statistics.geometric_mean(own[s] / base[s] for s in own), 4)
    return {kind: results[kind] for kind in dict.fromkeys((*kinds, reference)) if kind in results}


def pick(candidates: dict, dtype: torch.dtype) -> str:
    """Fastest choice whose error against the reference is within the dtype's
    tolerance (or the candidate's own "tolerance", where its measurement set a wider one: linear forms that round
    their activations), by its "relative" time where its measurement gives one (each_kind_compiled_decoding), else
    its "ms". `naive` (attention) is a reference only: it is picked only if nothing else runs."""
    tol = TOLERANCE[dtype]
    ok = {
        k: c
        for k, c in candidates.items()
        if c.get("runs") and c["max_abs_err"] <= max(tol, c.get("tolerance", 0.0)) and k != "naive"
    }
    if not ok:
        return "naive"
    return min(ok, key=lambda k: ok[k].get("relative") or ok[k]["ms"])
