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
adjacent. The reduction over that layout (model.Linear's "blocked" form) loads
32 outputs' weights in one vector and multiplies them by one broadcast input,
with no horizontal sum per row: one-row decode streams the weights at nearly
the memory's bandwidth, where the reduction over rows spends its time converting
and summing (issue #27's profile, bench/int8_gemv.py).
"""

import torch
import torch.nn as nn

from .model import GPT, Linear, from_row_blocks, to_row_blocks

QUANTIZATIONS = ("int8",)
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
    config whose weights are the int8 weights times their scales, in the model's
    dtype (what every int8 kernel must compute)."""
    if gpt.quantization != "int8":
        raise ValueError("the model is not quantized")
    reference = GPT(gpt.config, gpt.attention).to(device=gpt.lm_head.weight.device, dtype=gpt.dtype)
    quantized, state = gpt.state_dict(), {}
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
            size = tensor.element_size() if tensor.dtype == torch.int8 else dtype.itemsize
            total += tensor.numel() * size
    return total
