"""The golden vector: eager reference outputs an artifact carries, which the
runtime's verify reproduces with the compiled graphs, and how close it must come."""

import torch

from .model import GPT

GOLDEN_PROMPT_LEN = 8
# (atol, rtol) per dtype.
GOLDEN_TOLERANCE = {torch.float32: (1e-4, 1e-4), torch.bfloat16: (5e-2, 5e-2), torch.float16: (1e-2, 1e-2)}


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
