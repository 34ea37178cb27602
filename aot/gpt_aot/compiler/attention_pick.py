"""Pick the attention kernel for a target: pinned by the user, or measured.

Every kind that has a kernel for the device runs the model at its own shapes:
the prefill, decode steps over a half-full cache, forward + backward of the loss
for training; each graph gets its own pick. Results (logits, or every gradient)
are checked against the math backend and the fastest correct kind wins
(measure.py). All candidates are returned so the manifest can say why.
"""

import torch

from gpt_aot.compiler.measure import each_choice, each_choice_decoding, pick, tokens
from gpt_aot.compiler.target import Target
from gpt_aot.model.attention import ATTENTION_KINDS, attention_runs_on
from gpt_aot.model.gpt import GPT


def _prefill_once(model: GPT, idx: torch.Tensor) -> torch.Tensor:
    kv = model.new_kv_cache(idx.shape[0])
    return model.prefill(idx, kv)


def _each_kind(model: GPT, run, repeats: int) -> dict:
    return each_choice(model, "attention", ATTENTION_KINDS, "math", run, repeats)


def measure(model: GPT, seq: int | None = None, repeats: int = 5) -> dict:
    """Every kind's prefill of `seq` tokens (batch 1), logits against math's."""
    (idx,) = tokens(model, seq, 1)
    with torch.no_grad():
        return _each_kind(model, lambda m: [_prefill_once(m, idx)], repeats)


def measure_decode(model: GPT, steps: int = 4, repeats: int = 5) -> dict:
    """Every attention kind's decode, logits against math's. Compiled, not eager:
    one query over the whole cache is where Inductor's fusion decides the winner
    (eager math runs as separate ops and loses to flash on CPU; fused, it wins)."""
    return each_choice_decoding(model, "attention", ATTENTION_KINDS, "math", steps, repeats)


def _gradients(model: GPT, x: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
    model.zero_grad(set_to_none=True)
    _, loss = model(x, y)
    loss.backward()
    return [p.grad for p in model.parameters() if p.grad is not None]


def measure_training(model: GPT, seq: int | None = None, repeats: int = 3) -> dict:
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
    candidates = measure(model)
    return {
        "backend": pick(candidates, target.dtype),
        "selected_by": "measurement",
        "candidates": candidates,
    }
