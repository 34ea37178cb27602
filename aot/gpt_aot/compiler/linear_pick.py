"""Pick the form of each inference graph's linears (model/linear.py's Linear) for a target:
pinned by the user, or measured on the graph's own work (decode steps of one or
several sequences, a prefill) against mm (measure.py)."""

from contextlib import nullcontext

import torch

from gpt_aot.compiler.measure import each_choice, each_choice_decoding, pick, tokens
from gpt_aot.compiler.target import Target
from gpt_aot.model.attention import attention_context
from gpt_aot.model.gpt import GPT
from gpt_aot.model.linear import (
    PACKED_FORMS,
    Linear,
    linear_form_runs_on,
    linear_weight_names,
    packed_linear_weights,
    rounds_activations,
)
from gpt_aot.model.quantize import INT8_LAYOUTS, set_int8_layout

# Each graph's linear forms, by its weights' layout (GPT.weight_layout): float
# (None), int8 "rows" or "blocks32", int4 "blocks64". decode_one's pick decides
# an int8 artifact's layout (int8_layout_for), which the other graphs then
# share: they choose among that layout's forms.
# decode_one: oneDNN's is left out: it is measured only eagerly
# (measure_decode_linear), the reductions only compiled; the kernel library's
# linear has a loop of its own for one row.
DECODE_ONE_LINEAR_FORMS = {
    None: ("mm", "reduction", "kernel", "panels"),
    "rows": ("mm", "reduction", "int8pack", "kernel", "q8", "q8panels"),
    "blocks32": ("mm", "blocked"),
    "blocks64": ("mm", "int4pack", "kernel", "int4panels"),
}
# Graphs that step many rows (prefill, decode): matrix products (the kernel
# library's linear among them), and the blocked reduction, which reads a block
# once for all the rows; the reduction
# over rows reads the weight once per row. Each graph has its own pick:
# decode's measured on decode steps of BATCHED_ROWS sequences, prefill's on a
# prompt of PREFILL_TOKENS (int8 weights favour different kernels at 8 rows and
# at 128).
BATCHED_LINEAR_FORMS = {
    None: ("mm", "onednn", "kernel", "panels"),
    "rows": ("mm", "int8pack", "kernel", "q8", "q8panels"),
    "blocks32": ("mm", "blocked"),
    "blocks64": ("mm", "int4pack", "kernel", "int4panels"),
}
COMPILED_FORMS = ("reduction", "blocked")  # Inductor's code: measured compiled
BATCHED_ROWS = 8
# A form that rounds its activations (linear.rounds_activations) is correct within this fraction of the logits'
# largest magnitude.
ROUNDED_ACTIVATIONS_FRACTION = 2e-2
PREFILL_TOKENS = 128
GRAPHS = ("prefill", "decode", "decode_one")


def measure_decode_linear(model: GPT, forms: tuple, rows: int = 1, steps: int = 4, repeats: int = 5) -> dict:
    """Each linear form's decode of `rows` sequences (model/linear.py's Linear), with the
    model's attention, logits against mm's. Compiled when a reduction is among
    `forms` (COMPILED_FORMS) (it is Inductor's code); the matrix products alone run eagerly: each
    is one library call, compiled or not, and Inductor compiles oneDNN's linear
    only into a graph whose weights are constants (AOTInductor's are; a
    torch.compile'd module's are not). oneDNN's and the int4 kernel run on
    packed weights (PACKED_FORMS), as the runtime binds them."""
    compiled = any(f in COMPILED_FORMS for f in forms)
    if compiled and "onednn" in forms:
        raise ValueError("the reductions are measured compiled and oneDNN's linear eagerly: measure them apart")
    with packed_linear_weights(model, forms) if set(forms) & set(PACKED_FORMS) else nullcontext():
        return each_choice_decoding(model, "linear_form", forms, "mm", steps, repeats, rows, compiled)


def measure_prefill_linear(model: GPT, forms: tuple, seq: int = PREFILL_TOKENS, repeats: int = 5) -> dict:
    """Each batched form's prefill of one prompt of `seq` tokens (at most the
    context), compiled or eagerly as measure_decode_linear runs them, with the
    model's attention; logits against mm's."""
    (idx,) = tokens(model, min(seq, model.config.block_size), 1)
    kv = model.new_kv_cache(1)
    compiled = any(f in COMPILED_FORMS for f in forms)
    if compiled and "onednn" in forms:
        raise ValueError("the reductions are measured compiled and oneDNN's linear eagerly: measure them apart")
    prefill = torch.compile(model.prefill, dynamic=False) if compiled else model.prefill

    def run(m):
        with attention_context(m.attention):
            return [prefill(idx, kv)]

    with torch.no_grad(), packed_linear_weights(model, forms) if set(forms) & set(PACKED_FORMS) else nullcontext():
        try:
            return each_choice(model, "linear_form", forms, "mm", run, repeats)
        finally:
            torch._dynamo.reset()


def graph_linear_forms(model: GPT, graph: str) -> tuple:
    """The forms `graph` may run on the model's weights: decode_one of an int8
    model has every layout's (its pick sets the layout), the others the forms
    of the weights' current layout (panels for bf16 weights only)."""
    if graph not in GRAPHS:
        raise ValueError(f"graph {graph!r} is not one of {', '.join(GRAPHS)}")
    if graph == "decode_one" and model.quantization == "int8":
        return tuple(dict.fromkeys(f for layout in INT8_LAYOUTS for f in DECODE_ONE_LINEAR_FORMS[layout]))
    forms = (DECODE_ONE_LINEAR_FORMS if graph == "decode_one" else BATCHED_LINEAR_FORMS)[model.weight_layout]
    # panels packs bf16 weights only: on others it would be the kernel form again.
    return tuple(f for f in forms if f != "panels" or model.lm_head.weight.dtype == torch.bfloat16)


def int8_layout_for(decode_one_form: str) -> str:
    """The int8 layout that decode_one's linear form reads (its pick decides the artifact's)."""
    return next(layout for layout in INT8_LAYOUTS if decode_one_form in DECODE_ONE_LINEAR_FORMS[layout])


def choose_linear(
    model: GPT, target: Target, requested: str, attention: str, graph: str = "decode_one", rows: int = BATCHED_ROWS
) -> dict:
    """A linear form for `graph` (GRAPHS) out of the forms the model's weights
    allow there (graph_linear_forms): the pinned one, or the fastest correct one
    with the graph's `attention` on its own work: decode steps of one sequence
    (decode_one; an int8 model's in each layout) or of `rows` (decode), a
    prefill of PREFILL_TOKENS tokens (prefill). Where mm is the only form with a
    kernel (oneDNN's on a GPU), nothing is measured. The model's weights are
    left in the layout they had."""
    forms = graph_linear_forms(model, graph)
    rows = rows if graph == "decode" else 1
    weight_dtype = model.lm_head.weight.dtype
    if requested != "auto":
        if requested not in forms:
            raise ValueError(f"linear form {requested!r} is not one of auto, {', '.join(forms)}")
        if not linear_form_runs_on(requested, target.torch_device, weight_dtype):
            raise ValueError(f"linear form {requested!r} has no kernel on {target.torch_device.type}")
        return {"form": requested, "selected_by": "user"}
    if [f for f in forms if f != "mm" and linear_form_runs_on(f, target.torch_device, weight_dtype)] == []:
        return {"form": "mm", "selected_by": "only form with a kernel"}
    saved, layout = model.attention, model.int8_layout  # only int8 weights change layout here
    model.set_attention(attention)
    try:
        if graph == "prefill":
            candidates = measure_prefill_linear(model, forms)
        elif graph == "decode_one" and layout is not None:
            candidates = {}
            for each in INT8_LAYOUTS:  # mm once: its result is the same in every layout
                set_int8_layout(model, each)
                here = [f for f in DECODE_ONE_LINEAR_FORMS[each] if f in forms and f not in candidates]
                candidates.update(measure_decode_linear(model, tuple(here), rows))
        else:
            candidates = measure_decode_linear(model, forms, rows)
    finally:
        model.set_attention(saved)
        if layout is not None:
            set_int8_layout(model, layout)
    for form, candidate in candidates.items():
        if candidate.get("runs") and rounds_activations(form, model.weight_layout):
            # Its error is the activations' rounding to int8 blocks, a quantization like the weights' own: judged
            # against the logits' magnitude, not float rounding's tolerance (with q8 the int8 validation loss
            # stays within 1.0004 of bf16's: tests/fixtures/int8_accuracy.py).
            candidate["tolerance"] = ROUNDED_ACTIVATIONS_FRACTION * candidate["reference_max_abs"]
    shape = {"tokens": min(PREFILL_TOKENS, model.config.block_size)} if graph == "prefill" else {"rows": rows}
    form = pick(candidates, target.dtype)
    if form not in candidates:  # pick's answer when no form is correct: naive, an attention kind
        errors = ", ".join(f"{f} {c.get('max_abs_err', c.get('error'))}" for f, c in candidates.items())
        raise RuntimeError(f"no linear form of {graph} matches mm within tolerance ({attention} attention): {errors}")
    return {"form": form, "selected_by": "measurement", **shape, "candidates": candidates}


def with_packed_weights(choice: dict, model: GPT) -> dict:
    """A packed form's record (PACKED_FORMS) names the weights the runtime binds packed."""
    if choice["form"] not in PACKED_FORMS:
        return choice
    saved = {m: m.form for m in model.modules() if isinstance(m, Linear)}
    model.set_linear_form(choice["form"])  # the names depend on which linears the form packs
    try:
        return {**choice, "packed": linear_weight_names(model, choice["form"])}
    finally:
        for module, form in saved.items():
            module.form = form
