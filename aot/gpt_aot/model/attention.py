"""Attention kernels: a naive reference, PyTorch's SDPA backends and the project's
own decode kernel ("chunked", kernels/cpu/decode_attention.h: one query a row over
the cache positions it sees, in chunks split across threads).

The backend is pinned where attention is called, so whichever graph is traced
(eager, torch.export) contains exactly the chosen kernel and never a silent
fallback. `attention_runs_on` probes whether a kind has a kernel for a device.
"""

import math
from contextlib import nullcontext

import torch
from torch.nn import functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from gpt_aot.model import kernels

SDPA_BACKENDS = {
    "math": SDPBackend.MATH,
    "flash": SDPBackend.FLASH_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
}
ATTENTION_KINDS = ("naive", *SDPA_BACKENDS, "chunked")
# Kinds that are not SDPA backends: nothing to pin while tracing.
OWN_KINDS = ("naive", "chunked")
# Kinds whose masked call takes one query a row only (decode's): a graph that appends several tokens a row
# (extend) runs math instead (several_queries_kind).
ONE_QUERY_KINDS = ("chunked",)


def several_queries_kind(kind: str) -> str:
    """The kind a masked call of several queries a row runs where decode runs `kind`."""
    return "math" if kind in ONE_QUERY_KINDS else kind


def attend(kind: str, q, k, v, mask=None, dropout_p: float = 0.0):
    """q (B, nh, T, hs), k/v (B, nh, S, hs); mask: bool, True = visible, None = causal."""
    if kind == "naive":
        return _naive(q, k, v, mask, dropout_p)
    if kind == "chunked":
        raise RuntimeError("chunked attention runs decode's call only (attend_decoding): one new token a row")
    with sdpa_kernel([SDPA_BACKENDS[kind]]):
        if mask is None:
            return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)


def attention_context(kind: str):
    """Pins `kind`'s SDPA backend (tracing and compiling resolve the backend from it)."""
    return nullcontext() if kind in OWN_KINDS else sdpa_kernel([SDPA_BACKENDS[kind]])


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


def prepare_attention(kind: str) -> None:
    """Registers what `kind` calls before a model is set to it: the kernel library's operators for "chunked"
    (loaded here, outside any traced code, so that torch.compile and export see a registered operator)."""
    if kind == "chunked":
        kernels.load()


def attend_decoding(kind: str, q, k, v, k_cache, v_cache, pos, seq=None):
    """Decode's call: row b's new key and value, k and v (B, nh, 1, hs), written at its cache position pos[b]
    (B,) in k_cache and v_cache (B, nh, S, hs), in place; then its query q (B, nh, 1, hs) over positions
    0..pos[b]. "chunked" does both in the kernel library's one operator, which a compiled graph then hands the
    cache itself (a kernel reading a cache the graph had written would get a copy of it).
    With `seq` (B,) int64, row b is a token of the sequence in cache row seq[b] (caches (R, nh, S, hs)), several
    rows of one sequence included: every key and value is written before any query attends, so a row sees its
    sequence's earlier tokens of the same call (the mixed graph: decode steps and prompt pieces in one forward)."""
    if k_cache.dtype == torch.int8 and kind != "chunked":
        raise ValueError(f"an int8 KV cache is read by the chunked attention only, not {kind!r}")
    if kind == "chunked":
        scale = q.size(-1) ** -0.5
        if seq is None:
            return torch.ops.gpt_kernels.decode_attention(q, k, v, k_cache, v_cache, pos, scale)
        return torch.ops.gpt_kernels.decode_attention_rows(q, k, v, k_cache, v_cache, pos, seq, scale)
    rows = torch.arange(q.shape[0], device=q.device) if seq is None else seq
    k_cache[rows, :, pos] = k[:, :, 0]  # indexed assignment (index_put_): what Inductor does in place
    v_cache[rows, :, pos] = v[:, :, 0]
    span = k_cache.shape[2]
    visible = torch.arange(span, device=q.device).view(1, span) <= pos.view(-1, 1)  # (B, S)
    if seq is not None:  # each row's own sequence's cache: a copy of it per row (the kernels above read in place)
        k_cache, v_cache = k_cache[seq], v_cache[seq]
    return attend(kind, q, k_cache, v_cache, mask=visible.view(-1, 1, 1, span))


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
    if kind == "chunked" and (call != "masked" or device.type != "cpu" or not kernels.available()):
        return False  # decode's call on the CPU only, and only where the library builds
    q = torch.randn(1, 2, 4, 16, device=device, dtype=dtype)
    try:
        if call == "causal":
            attend(kind, q, q, q)
        else:
            one = q[:, :, :1].contiguous()
            attend_decoding(kind, one, one, one, q.clone(), q.clone(), torch.tensor([3], device=device))
    except RuntimeError:
        return False
    return True
