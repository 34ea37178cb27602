"""Pick the attention kernel for a target: pinned by the user, or measured.

Every kind that has a kernel for the device runs the model at its own shapes:
the prefill, decode steps as the artifact's own compiled decode graph runs them
(one and eight rows, a short and a full cache), forward + backward of the loss
for training; each graph gets its own pick. Results (logits, or every gradient)
are checked against the math backend and the fastest correct kind wins
(measure.py). All candidates are returned so the manifest can say why.
"""

import torch

from gpt_aot.compiler.measure import each_choice, each_kind_compiled_decoding, pick, tokens
from gpt_aot.compiler.target import Target
from gpt_aot.model.attention import ATTENTION_KINDS, attention_runs_on
from gpt_aot.model.gpt import GPT


def _prefill_once(model: GPT, idx: torch.Tensor) -> torch.Tensor:
    kv = model.new_kv_cache(idx.shape[0])
    return model.prefill(idx, kv)


def _each_kind(model: GPT, run, repeats: int) -> dict:
    return each_choice(model, "attention", ATTENTION_KINDS, "math", run, repeats)


def measure(model: GPT, target: Target | None = None, seq: int | None = None, repeats: int = 5) -> dict:
    """Every kind's prefill of `seq` tokens (batch 1), logits against math's."""
    (idx,) = tokens(model, seq, 1)
    with torch.no_grad():
        return _each_kind(model, lambda m: [_prefill_once(m, idx)], repeats)


# Decode's settings: one row and eight, over a short cache and the whole context (the batch-dynamic decode graph
# at each; decode_one runs the same kernel).
DECODE_ROWS = (1, 8)
DECODE_SPANS = (128, 1 << 30)  # clipped to the model's context


def measure_decode(model: GPT, target: Target, repeats: int = 5) -> dict:
    """Every attention kind's decode, logits against math's, timed as what will run: the decode graph
    AOTInductor compiles for `target` (measure.each_kind_compiled_decoding). Neither eager nor torch.compile
    ranks them as the artifact does: eager runs math as separate operators; torch.compile hands a kernel that
    writes the cache (chunked) a copy of it, which an artifact's graph does not. naive is a reference for
    the prefill's and training's picks, not compiled here."""
    kinds = tuple(k for k in ATTENTION_KINDS if k != "naive")
    return each_kind_compiled_decoding(model, target, kinds, "math", DECODE_SPANS, DECODE_ROWS, repeats)


def _gradients(model: GPT, x: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
    model.zero_grad(set_to_none=True)
    _, loss = model(x, y)
    loss.backward()
    return [p.grad for p in model.parameters() if p.grad is not None]


def measure_training(model: GPT, target: Target | None = None, seq: int | None = None, repeats: int = 3) -> dict:
    """Every kind's forward + backward of the loss (batch 1, `seq` tokens, dropout
    off), every gradient against math's."""
    x, y = tokens(model, seq, 2)
    saved_mode = model.training
    model.eval()  # dropout off: gradients of every kind are comparable
    try:
        return _each_kind(model, lambda m: _gradients(m, x, y), repeats)
    finally:
        model.zero_grad(set_to_none=True)
        model.train(saved_mode)


def choose_attention(model: GPT, target: Target, requested: str, measure=measure) -> dict:
    """The pinned kernel, or the fastest correct one by `measure` (measure for
    the prefill, measure_decode, measure_training). A pinned kernel must run the
    call the graph makes (attention.ATTENTION_CALLS: masked for decode)."""
    if requested != "auto":
        call = "masked" if measure is measure_decode else "causal"
        if not attention_runs_on(requested, target.torch_device, target.dtype, call):
            raise ValueError(
                f"attention {requested!r} has no kernel for the {call} call "
                f"({'decode' if call == 'masked' else 'prefill, training'}) on {target.device}/{target.dtype}"
            )
        return {"backend": requested, "selected_by": "user"}
    candidates = measure(model, target)
    return {
        "backend": pick(candidates, target.dtype),
        "selected_by": "measurement",
        "candidates": candidates,
    }
