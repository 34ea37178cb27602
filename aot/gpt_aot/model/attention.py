"""Attention kernels: a naive reference and PyTorch's SDPA backends.

The backend is pinned where attention is called, so whichever graph is traced
(eager, torch.export) contains exactly the chosen kernel and never a silent
fallback. `attention_runs_on` probes whether a kind has a kernel for a device.
"""

import math
from contextlib import nullcontext

import torch
from torch.nn import functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

SDPA_BACKENDS = {
    "math": SDPBackend.MATH,
    "flash": SDPBackend.FLASH_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
}
ATTENTION_KINDS = ("naive", *SDPA_BACKENDS)


def attend(kind: str, q, k, v, mask=None, dropout_p: float = 0.0):
    """q (B, nh, T, hs), k/v (B, nh, S, hs); mask: bool, True = visible, None = causal."""
    if kind == "naive":
        return _naive(q, k, v, mask, dropout_p)
    with sdpa_kernel([SDPA_BACKENDS[kind]]):
        if mask is None:
            return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)


def attention_context(kind: str):
    """Pins `kind`'s SDPA backend (tracing and compiling resolve the backend from it)."""
    return nullcontext() if kind == "naive" else sdpa_kernel([SDPA_BACKENDS[kind]])


def _naive(q, k, v, mask, dropout_p):
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.size(-1)))  # (B, nh, T, S)
    if mask is None:
        T, S = q.size(-2), k.size(-2)
        mask = torch.ones(T, S, dtype=torch.bool, device=q.device).tril()
    att = att.masked_fill(~mask, float("-inf"))
    att = F.softmax(att, dim=-1)
    if dropout_p > 0.0:
        att = F.dropout(att, dropout_p)
    return att @ v


# The two calls the model makes (gpt.py): "causal", a prompt or training window attending to itself
# (prefill, forward, training), and "masked", one query per row over a cache with a mask of the
# positions it sees (decode). Kernels differ: FlashAttention takes no mask on CUDA, so it runs the
# first and never the second.
ATTENTION_CALLS = ("causal", "masked")


def attention_runs_on(kind: str, device: torch.device, dtype: torch.dtype, call: str = "causal") -> bool:
    """True if `kind` has a kernel for this device and dtype for `call` (ATTENTION_CALLS), probed
    with that call's shape and arguments."""
    if call not in ATTENTION_CALLS:
        raise ValueError(f"attention call {call!r} is not one of {', '.join(ATTENTION_CALLS)}")
    q = torch.randn(1, 2, 4, 16, device=device, dtype=dtype)
    try:
        if call == "causal":
            attend(kind, q, q, q)
        else:
            attend(kind, q[:, :, :1], q, q, mask=torch.ones(1, 1, 1, 4, dtype=torch.bool, device=device))
    except RuntimeError:
        return False
    return True
