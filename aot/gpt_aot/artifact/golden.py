"""The golden vector: eager reference outputs an artifact carries, which the
runtime's verify reproduces with the compiled graphs, and how close it must come."""

import copy

import torch

from gpt_aot.model.gpt import GPT
from gpt_aot.model.linear import rounds_activations

GOLDEN_PROMPT_LEN = 8
# Fixed (atol, rtol) per dtype: fp32 goldens, and (x 10) the compiled training step's gradients.
GOLDEN_TOLERANCE = {torch.float32: (1e-4, 1e-4), torch.bfloat16: (5e-2, 5e-2), torch.float16: (1e-2, 1e-2)}
# A bf16 or fp16 golden's bound is calibrated per artifact instead (golden_tolerance): a fixed one
# is loose for a model of small logits (5e-2 passes a tiny model's attention output 10 % too large)
# and tight for a large one. The bound is the rounding noise of the model's own dtype, measured as
# its logits' distance from the same weights computed in fp32, times NOISE_MARGIN: another correct
# computation in that dtype (a compiled graph, another kernel) rounds in another order and lies
# about as far from the golden (random GPT-2 124M in bf16: bf16 against fp32 0.022, flash against
# math 0.023, its compiled graphs against the golden 0.035). The floor, FLOOR_ULPS of the dtype at
# the largest logit, keeps a model whose noise happens to be tiny from a bound below a rounding step.
NOISE_MARGIN = 2.5
FLOOR_ULPS = 1.0


def golden_vector(model: GPT, prefill_attention: str | None = None) -> dict:
    """Eager reference outputs the runtime's verify reproduces: a prefill with
    `prefill_attention` (the prefill graph's kernel; the model's when None) and
    one decode step with the model's attention kind (decode's), each graph's
    result computed with its own kernel; the linear form as it is."""
    c = model.config
    device = model.lm_head.weight.device
    n = min(GOLDEN_PROMPT_LEN, c.block_size - 1)
    gen = torch.Generator().manual_seed(1234)
    tokens = torch.randint(0, c.vocab_size, (1, n), generator=gen).to(device)
    kv = model.new_kv_cache(1)
    decode_attention = model.attention
    with torch.no_grad():
        model.set_attention(prefill_attention or decode_attention)
        try:
            prefill_logits = model.prefill(tokens, kv)
        finally:
            model.set_attention(decode_attention)
        next_token = prefill_logits[:, : c.vocab_size].argmax(-1, keepdim=True)
        decode_logits = model.decode(next_token, torch.tensor([n], device=device), kv)
    return {
        "tokens": tokens.cpu(),
        "prefill_logits": prefill_logits.float().cpu(),
        "decode_token": next_token.cpu(),
        "decode_logits": decode_logits.float().cpu(),
    }


def golden_tolerance(
    model: GPT, golden: dict, dtype: torch.dtype, forms: tuple = (), prefill_attention: str | None = None
) -> tuple[float, float]:
    """(atol, rtol) for `golden` (golden_vector of `model`, which computes in `dtype`, its weights
    perhaps quantized): GOLDEN_TOLERANCE's for fp32, else calibrated to this model's rounding noise
    (see NOISE_MARGIN), with rtol 0. Where one of the graphs' linear `forms` rounds the activations
    (linear.rounds_activations), atol is at least NOISE_MARGIN times that form's distance from the golden; so
    too for an int8 KV cache, against the same model over a float cache."""
    atol, rtol = _dtype_tolerance(model, golden, dtype)
    logits = ("prefill_logits", "decode_logits")
    saved = model.linear_form
    try:
        for form in forms:
            if rounds_activations(form, model.weight_layout):
                model.set_linear_form(form)
                rounded = golden_vector(model, prefill_attention)
                atol = max(atol, NOISE_MARGIN * max((golden[k] - rounded[k]).abs().max().item() for k in logits))
    finally:
        model.set_linear_form(saved)
    if model.kv_dtype:
        # The cache rounds each key and value as a form rounding the activations does: a graph whose keys differ
        # from eager's in the last bit may round one to the next int8 level. Bounded as those forms are, by its
        # distance from the same model over a float cache.
        float_cache = copy.deepcopy(model)
        float_cache.set_kv_dtype(None)
        float_cache.set_attention("math")
        exact = golden_vector(float_cache, "math")
        atol = max(atol, NOISE_MARGIN * max((golden[k] - exact[k]).abs().max().item() for k in logits))
    return atol, rtol


def _dtype_tolerance(model: GPT, golden: dict, dtype: torch.dtype) -> tuple[float, float]:
    """golden_tolerance's bound for the rounding of `dtype` alone."""
    if dtype == torch.float32:
        return GOLDEN_TOLERANCE[torch.float32]
    # The same weights in fp32, through the plain kernels every device runs in fp32 (flash and cuDNN
    # attention have no fp32 kernels; a quantized model's dequantized product).
    reference_model = copy.deepcopy(model).float()
    reference_model.set_kv_dtype(None)  # math reads a float cache
    reference_model.set_attention("math")
    reference_model.set_linear_form("mm")
    reference = golden_vector(reference_model)
    logits = ("prefill_logits", "decode_logits")
    noise = max((golden[k] - reference[k]).abs().max().item() for k in logits)
    peak = max(golden[k].abs().max().item() for k in logits)
    return max(NOISE_MARGIN * noise, FLOOR_ULPS * torch.finfo(dtype).eps * peak), 0.0
