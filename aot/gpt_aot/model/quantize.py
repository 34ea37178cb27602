"""Weight-only int8: every linear's weight (lm_head's too, and with it the tied
embedding) becomes int8 with one scale per output row, symmetric (no zero
point); activations, the other weights and accumulation stay in the model's
dtype. Decode at batch 1 reads each weight once per token, so its speed is the
weights' bytes over the memory's bandwidth: half the bytes of bf16.

The embedding reads lm_head's int8 table (the rows it gathers times their
scales) instead of keeping a float copy: one row per token costs nothing to
convert, and a copy would add back a quarter of GPT-2 124M's bf16 bytes.

Two layouts of the int8 weights (INT8_LAYOUTS; set_int8_layout): "rows", each
weight (rows, cols) as nn.Linear keeps it, which aten's int8 kernel reads; and
"blocks32", each weight as (ceil(rows / 32), cols, 32): block b holds output
rows 32b..32b+31 (zero rows pad the last), and its 32 weights of one input are
adjacent. The reduction over that layout (linear.Linear's "blocked" form) loads
32 outputs' weights in one vector and multiplies them by one broadcast input,
with no horizontal sum per row: one-row decode streams the weights at nearly
the memory's bandwidth, where the reduction over rows spends its time converting
and summing (issue #27's profile, bench/int8_gemv.py).

Weight-only int4 (quantize_int4): every linear's weight in groups of
`group_size` inputs per output row, each group with a scale and a zero in the
model's dtype (asymmetric: the group's range [min, max] over 16 levels), a
weight q (0..15) standing for (q - 8) * scale + zero; two weights a byte, in
blocks of 64 rows (linear.to_int4_blocks; aten's int4 kernel reads a copy
packed for the host, linear.pack_for_int4pack). Each linear
holds `weight_scale_zero` (padded rows / 64, cols / group_size, 64, 2: each
block's pairs in one run, linear.to_int4_pair_blocks) and `weight_group_size`
(the one number aten's int4 kernel takes as a tensor).
A quarter of bf16's bytes plus a scale and a zero per group (1/16 of bf16's at 32).
The tied embedding gathers lm_head's int4 rows, as with int8.
"""

import torch
import torch.nn as nn

from gpt_aot.model.gpt import GPT
from gpt_aot.model.linear import (
    INT4_ZERO,
    Linear,
    dequantize_int4,
    from_row_blocks,
    to_int4_blocks,
    to_int4_pair_blocks,
    to_row_blocks,
)

QUANTIZATIONS = ("int8", "int4")
INT4_GROUP_SIZES = (32, 64, 128, 256)  # those aten's CPU int4 kernel takes
INT4_LEVELS = 15  # the largest int4 value
INT8_MAX = 127  # symmetric: -127..127, so q and -q are both representable
INT8_LAYOUTS = ("rows", "blocks32")


def quantize_rows(weight: torch.Tensor, scale_dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(int8 weight, per-row scale in `scale_dtype`): scale = max |row| / 127,
    rounded to `scale_dtype` first, so q × scale is the nearest the stored scale
    can reconstruct. An all-zero row (the vocabulary's padding) gets scale 1."""
    w = weight.detach().float()
    amax = w.abs().amax(dim=1)
    scale = torch.where(amax > 0, amax / INT8_MAX, torch.ones_like(amax)).to(scale_dtype)
    q = torch.round(w / scale.float().unsqueeze(1)).clamp(-INT8_MAX, INT8_MAX).to(torch.int8)
    return q, scale


def quantize_int8(gpt: GPT, scale_dtype: torch.dtype) -> GPT:
    """Quantize `gpt`'s linears in place (inference only: int8 weights have no
    gradients). Each weight keeps its name; its scale is the buffer
    `<linear>.weight_scale`, stored in the weights file beside it."""
    if gpt.quantization is not None:
        raise ValueError(f"the model is already quantized ({gpt.quantization})")
    for module in gpt.modules():
        if isinstance(module, Linear):
            q, scale = quantize_rows(module.weight, scale_dtype)
            module.weight = nn.Parameter(q, requires_grad=False)
            module.register_buffer("weight_scale", scale.to(module.weight.device))
    gpt.transformer.wte.weight = gpt.lm_head.weight  # still tied: the embedding gathers the int8 rows
    gpt.quantization = "int8"
    return gpt.requires_grad_(False)


def quantize_groups(weight: torch.Tensor, group_size: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(int4 values (rows, cols) as uint8, (cols / group_size, rows, 2) scales
    and zeros in `dtype`): each group's [min, max] over 16 levels, the scale
    and zero rounded to `dtype` first, so every q is the nearest level the
    stored pair can reconstruct. A constant group (the vocabulary's zero
    padding) gets scale 1 and reconstructs exactly its value (as `dtype`)."""
    rows, cols = weight.shape
    if cols % group_size:
        raise ValueError(f"a linear's {cols} inputs are not a whole number of groups of {group_size}")
    w = weight.detach().float().view(rows, cols // group_size, group_size)
    low, high = w.amin(dim=2), w.amax(dim=2)
    constant = high == low
    scale = torch.where(constant, 1.0, (high - low) / INT4_LEVELS).to(dtype).float()
    zero = torch.where(constant, low, low + INT4_ZERO * scale).to(dtype).float()  # q = 8 is the constant
    q = torch.round((w - zero.unsqueeze(2)) / scale.unsqueeze(2) + INT4_ZERO).clamp(0, INT4_LEVELS)
    scale_zero = torch.stack([scale, zero], dim=-1).transpose(0, 1).contiguous().to(dtype)
    return q.view(rows, cols).to(torch.uint8), scale_zero


def quantize_int4(gpt: GPT, dtype: torch.dtype, group_size: int = 32) -> GPT:
    """Quantize `gpt`'s linears to int4 in place, as quantize_int8 does to int8
    (inference only). Each weight keeps its name; its scales and zeros are
    `<linear>.weight_scale_zero` (rows padded as the weight's), its group size
    `<linear>.weight_group_size`."""
    if gpt.quantization is not None:
        raise ValueError(f"the model is already quantized ({gpt.quantization})")
    if group_size not in INT4_GROUP_SIZES:
        raise ValueError(f"int4 group size {group_size} is not one of {', '.join(map(str, INT4_GROUP_SIZES))}")
    for module in gpt.modules():
        if isinstance(module, Linear):
            q, scale_zero = quantize_groups(module.weight, group_size, dtype)
            packed = to_int4_blocks(q)
            padded = torch.zeros(scale_zero.shape[0], packed.shape[0], 2, dtype=dtype)
            padded[:, : q.shape[0]] = scale_zero
            device = module.weight.device
            module.weight = nn.Parameter(packed.to(device), requires_grad=False)
            module.register_buffer("weight_scale_zero", to_int4_pair_blocks(padded).to(device))
            module.register_buffer("weight_group_size", torch.tensor(group_size, dtype=torch.int64, device=device))
    gpt.transformer.wte.weight = gpt.lm_head.weight  # still tied: the embedding gathers the int4 rows
    gpt.quantization = "int4"
    return gpt.requires_grad_(False)


def set_int8_layout(gpt: GPT, layout: str) -> GPT:
    """Lay every int8 weight out as `layout` (INT8_LAYOUTS), in place; the
    linear forms the model allows follow (GPT.linear_forms)."""
    if gpt.quantization != "int8":
        raise ValueError("the model is not quantized")
    if layout not in INT8_LAYOUTS:
        raise ValueError(f"int8 layout {layout!r} is not one of {', '.join(INT8_LAYOUTS)}")
    if layout == gpt.int8_layout:
        return gpt
    for module in gpt.modules():
        if isinstance(module, Linear):
            w = module.weight.detach()
            w = to_row_blocks(w) if layout == "blocks32" else from_row_blocks(w, module.out_features).contiguous()
            module.weight = nn.Parameter(w, requires_grad=False)
    gpt.transformer.wte.weight = gpt.lm_head.weight
    return gpt


def dequantized(gpt: GPT) -> GPT:
    """The eager reference of a quantized model: an unquantized GPT of the same
    config whose weights are the ones the quantized weights stand for, in the
    model's dtype (what every quantized kernel must compute): int8 weights
    times their scales, int4 ones as linear.dequantize_int4 reads them."""
    if gpt.quantization is None:
        raise ValueError("the model is not quantized")
    reference = GPT(gpt.config, gpt.attention).to(device=gpt.lm_head.weight.device, dtype=gpt.dtype)
    quantized, state = gpt.state_dict(), {}
    if gpt.quantization == "int4":
        linears = {f"{name}.weight": m for name, m in gpt.named_modules() if isinstance(m, Linear)}
        linears["transformer.wte.weight"] = gpt.lm_head
        for name, tensor in quantized.items():
            if name in linears:
                m = linears[name]
                tensor = dequantize_int4(m.weight, m.weight_scale_zero, m.out_features, gpt.dtype)
            if not name.endswith((".weight_scale_zero", ".weight_group_size")):
                state[name] = tensor
        reference.load_state_dict(state)
        return reference.eval()
    for name, tensor in quantized.items():
        if name.endswith(".weight_scale"):
            continue
        scale = quantized.get(name + "_scale")
        if name == "transformer.wte.weight":
            scale = gpt.lm_head.weight_scale
        if scale is not None and tensor.dim() == 3:
            tensor = from_row_blocks(tensor, scale.numel())
        state[name] = tensor if scale is None else tensor.to(gpt.dtype) * scale.unsqueeze(1)
    reference.load_state_dict(state)
    return reference.eval()


def weight_bytes(gpt: GPT, dtype: torch.dtype) -> int:
    """Bytes of the model's tensors, each tied tensor once (what the weights file
    stores), its float tensors counted in `dtype`, the artifact's."""
    seen, total = set(), 0
    for tensor in gpt.state_dict().values():
        if tensor.data_ptr() not in seen:
            seen.add(tensor.data_ptr())
            size = dtype.itemsize if tensor.is_floating_point() else tensor.element_size()
            total += tensor.numel() * size
    return total
