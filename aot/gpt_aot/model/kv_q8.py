"""One position of an int8 KV cache in torch operations, as kernels/cpu/kv_row_q8.h writes and reads it: a head's D
values rounded to int8 against the position's own scale (its largest magnitude / 127), then that scale's fp32 bytes,
D + SCALE_BYTES bytes in all. The kernel library's decode attention rounds each new key and value itself; a prompt's
tokens (prefill, extend) are rounded here, with the same operations in the same order, so the bytes are the kernel's,
and then attend with SDPA over the values the cache holds, as many queries a call as the prompt has.

Only operations that torch.export and Inductor keep exact: the scale's bytes are taken apart and put together with
integer arithmetic and same-width bitcasts (a view to another width falls back to an eager call in AOTInductor)."""

import torch

SCALE_BYTES = 4
INT8_MAX = 127.0
_BYTE = 256


def store(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x (..., D) as an int8 cache stores it: (its bytes (..., D + SCALE_BYTES) int8, the values they hold in x's
    dtype). A row of zeros gets scale 0; a row holding a value that is not finite gets a NaN scale and zeros, which
    every score and output it enters then carries."""
    xf = x.float()
    finite = torch.isfinite(xf).all(dim=-1, keepdim=True)
    scale = torch.where(finite, xf.abs().amax(dim=-1, keepdim=True) / INT8_MAX, float("nan"))
    inverse = torch.where(scale > 0, 1.0 / scale, 0.0)  # NaN > 0 is false
    values = torch.where(finite, torch.round(xf * inverse), 0.0)  # round half to even, as std::nearbyint
    bits = scale.view(torch.int32)
    scale_bytes = torch.cat([(bits >> shift) & (_BYTE - 1) for shift in (0, 8, 16, 24)], dim=-1)  # little-endian
    stored = torch.cat([values.to(torch.int8), scale_bytes.to(torch.uint8).view(torch.int8)], dim=-1)
    return stored, (values * scale).to(x.dtype)


def values(cache: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The values an int8 cache (..., D + SCALE_BYTES) holds, (..., D) in `dtype`: each position's int8 values times
    its scale."""
    d = cache.shape[-1] - SCALE_BYTES
    low = cache[..., d : d + 3].view(torch.uint8).to(torch.int32)
    high = cache[..., d + 3].to(torch.int32)  # the sign byte, sign-extended: no int32 overflow below
    bits = high * _BYTE**3 + low[..., 2] * _BYTE**2 + low[..., 1] * _BYTE + low[..., 0]
    scale = bits.view(torch.float32).unsqueeze(-1)
    return (cache[..., :d].float() * scale).to(dtype)
