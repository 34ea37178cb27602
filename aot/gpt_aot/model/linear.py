"""The model's linear layers (Linear) and the forms they run as, over float
weights or quantized ones (quantize.py) in each weight layout.

Weight layouts (WEIGHT_LAYOUTS), named by GPT.weight_layout: None, float
weights as nn.Linear keeps them; int8 as "rows" (the same shape) or "blocks32"
(to_row_blocks); int4 as "blocks64" (to_int4_blocks), the one stored layout.

aten's CPU int4 kernel reads a packing that depends on the ATen CPU capability
of the host at run time (AVX-512: blocks64 itself; AVX2: blocks of 32 rows;
default: yet another), so the int4pack form reads a copy packed for the host
by aten's own packer (pack_for_int4pack), as the onednn form reads a copy in
oneDNN's layout: PACKED_FORMS.
"""

from contextlib import contextmanager

import torch
import torch.nn as nn
from torch.nn import functional as F

from gpt_aot.model import kernels

LINEAR_FORMS = (
    "mm",
    "reduction",
    "onednn",
    "kernel",
    "panels",
    "int8pack",
    "blocked",
    "int4pack",
    "q8",
    "q8panels",
    "int4panels",
)
# The forms each weight layout allows: oneDNN's reads float weights; the kernel library's (kernels/cpu/linear.h:
# weights widened in registers, for CPUs where torch's bf16 GEMM is a dot product at a time) float weights and
# int8 "rows"; int8 weights by their layout (quantize.py): aten's int8 kernel and the reduction over rows read
# "rows", the blocked reduction "blocks32"; aten's int4 kernel and the kernel library's linear_int4 read int4
# "blocks64"; "q8", the kernel library's int8 "rows" times the activations rounded to int8 blocks, "rows"; mm
# reads any. "panels" is the kernel library's product over bf16 weights packed in panels where they run
# (pack_for_panels), weights of other shapes (and a tied head) read by its `kernel` form as stored; "q8panels" q8's
# product over int8 "rows" packed in q8 panels where they run (pack_for_q8_panels), K a multiple of 32; "int4panels"
# the kernel library's int4 product over "blocks64" packed in u4 panels where they run (pack_for_int4_panels).
LAYOUT_LINEAR_FORMS = {
    None: ("mm", "reduction", "onednn", "kernel", "panels"),
    "rows": ("mm", "reduction", "int8pack", "kernel", "q8", "q8panels"),
    "blocks32": ("mm", "blocked"),
    "blocks64": ("mm", "int4pack", "kernel", "int4panels"),
}
WEIGHT_LAYOUTS = tuple(LAYOUT_LINEAR_FORMS)
BLOCK_ROWS = 32  # output rows per block of the int8 "blocks32" layout
INT4_BLOCK_ROWS = 64  # output rows per block of the int4 "blocks64" layout
PANEL_ROWS = 16  # output rows per panel of the panels form's packing (kernels/cpu/linear.h)
INT4_ZERO = 8  # an int4 weight q (0..15) stands for (q - 8) * scale + zero (aten's int4 kernels' convention)
# The forms whose graphs read copies of the linear weights packed where they run (the runtime's
# exec/packed_weights.cpp, ArtifactGraphs, packed_linear_weights): the graph names the stored weight.
PACKED_FORMS = ("onednn", "int4pack", "panels", "q8panels", "int4panels")


def to_row_blocks(q: torch.Tensor) -> torch.Tensor:
    """(rows, cols) → (ceil(rows / BLOCK_ROWS), cols, BLOCK_ROWS), the last block padded with zero rows."""
    rows, cols = q.shape
    padded = torch.zeros(-(-rows // BLOCK_ROWS) * BLOCK_ROWS, cols, dtype=q.dtype, device=q.device)
    padded[:rows] = q
    return padded.view(-1, BLOCK_ROWS, cols).transpose(1, 2).contiguous()


def from_row_blocks(blocks: torch.Tensor, rows: int) -> torch.Tensor:
    """The inverse of to_row_blocks: the (rows, cols) weight (a copy)."""
    return blocks.transpose(1, 2).reshape(-1, blocks.shape[1])[:rows]


def to_int4_blocks(q: torch.Tensor) -> torch.Tensor:
    """(rows, cols) int4 values (0..15, cols even) → (ceil(rows / 64) * 64,
    cols / 2) bytes, the stored "blocks64" layout (aten's CPU int4 packing on an
    AVX-512 host, but the kernel reads pack_for_int4pack's copy): block b holds
    output rows 64b..64b+63 (zero rows pad the last) as (cols, 32) bytes, the
    byte of input k and row j holding row j in its low four bits and row j + 32
    in its high four."""
    rows, cols = q.shape
    padded = torch.zeros(-(-rows // INT4_BLOCK_ROWS) * INT4_BLOCK_ROWS, cols, dtype=torch.uint8, device=q.device)
    padded[:rows] = q.to(torch.uint8)
    halves = padded.view(-1, 2, INT4_BLOCK_ROWS // 2, cols)
    return (halves[:, 0] | (halves[:, 1] << 4)).transpose(1, 2).contiguous().view(-1, cols // 2)


def from_int4_blocks(packed: torch.Tensor, rows: int) -> torch.Tensor:
    """The inverse of to_int4_blocks: the (rows, cols) int4 values as uint8."""
    cols = packed.shape[1] * 2
    blocks = packed.view(-1, cols, INT4_BLOCK_ROWS // 2)
    halves = torch.stack([blocks & 15, blocks >> 4], dim=1)  # (blocks, 2, cols, 32)
    return halves.transpose(2, 3).reshape(-1, cols)[:rows]


def pack_for_int4pack(packed: torch.Tensor) -> torch.Tensor:
    """A blocks64 weight (padded rows, cols / 2) in the packing this host's aten
    CPU int4 kernel reads, the same shape (padding rows included): aten's own
    packer over the int values, as runtime/exec/packed_weights.cpp packs it."""
    q = from_int4_blocks(packed.detach(), packed.shape[0]).to(torch.int32)
    return torch._convert_weight_to_int4pack_for_cpu(q, 1)


def host_reads_int4_blocks64() -> bool:
    """Whether this host's aten CPU int4 kernel reads blocks64 as stored (its
    packing of the same values gives the same bytes: an AVX-512 host). Only
    there do int4pack graphs that name no packed weights (compiled before they
    were packed at load) compute right."""
    probe = (torch.arange(INT4_BLOCK_ROWS * 4) * 37 + 11).remainder(256).to(torch.uint8).view(INT4_BLOCK_ROWS, 4)
    return torch.equal(pack_for_int4pack(probe), probe)


def to_int4_pair_blocks(scale_zero: torch.Tensor) -> torch.Tensor:
    """(cols / group, padded rows, 2) (scale, zero) pairs → (padded rows / 64,
    cols / group, 64, 2), the stored layout beside blocks64 weights: block b's
    pairs in one run, group by group, so the kernel reads a block's pairs as
    one stream beside its bytes (group-major pairs lie a whole weight's rows
    apart, a miss per group the prefetchers do not follow)."""
    groups, rows, _ = scale_zero.shape
    return scale_zero.view(groups, rows // INT4_BLOCK_ROWS, INT4_BLOCK_ROWS, 2).transpose(0, 1).contiguous()


def from_int4_pair_blocks(pairs: torch.Tensor) -> torch.Tensor:
    """The inverse of to_int4_pair_blocks: (cols / group, padded rows, 2), as aten's int4 kernel reads them."""
    blocks, groups, block_rows, _ = pairs.shape
    return pairs.transpose(0, 1).reshape(groups, blocks * block_rows, 2)


def int4_scales(scale_zero: torch.Tensor, rows: torch.Tensor | slice, cols: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Each weight's (scale, zero) for output `rows` (a slice or an index
    tensor of any shape), (*rows, cols) each: `scale_zero` holds one pair per
    group of inputs and output row (to_int4_pair_blocks)."""
    group = cols // scale_zero.shape[1]
    by_row = scale_zero.transpose(1, 2).reshape(-1, scale_zero.shape[1], 2)  # (padded rows, groups, 2)
    pairs = by_row[rows].repeat_interleave(group, dim=-2)  # (*rows, cols, 2)
    return pairs[..., 0], pairs[..., 1]


def dequantize_int4(packed: torch.Tensor, scale_zero: torch.Tensor, rows: int, dtype: torch.dtype) -> torch.Tensor:
    """The (rows, cols) weight an int4 linear stands for, computed in fp32 and rounded once to `dtype`."""
    q = from_int4_blocks(packed, rows).float()
    scale, zero = int4_scales(scale_zero, slice(0, rows), q.shape[1])
    return ((q - INT4_ZERO) * scale.float() + zero.float()).to(dtype)


def int4_embedding(packed: torch.Tensor, scale_zero: torch.Tensor, idx: torch.Tensor, dtype: torch.dtype):
    """Rows `idx` of an int4 table in blocks of 64 (the tied embedding): (*idx.shape, cols) in `dtype`."""
    cols = packed.shape[1] * 2
    blocks = packed.view(-1, cols, INT4_BLOCK_ROWS // 2)
    half = INT4_BLOCK_ROWS // 2
    byte = blocks[idx // INT4_BLOCK_ROWS, :, idx % half]  # (*idx, cols)
    q = (byte >> ((idx % INT4_BLOCK_ROWS) // half * 4).to(torch.uint8).unsqueeze(-1)) & 15
    scale, zero = int4_scales(scale_zero, idx, cols)
    return ((q.float() - INT4_ZERO) * scale.float() + zero.float()).to(dtype)


def rounds_activations(form: str, weight_layout: str | None) -> bool:
    """Whether `form` rounds its activations before the products (the int4 kernel's and q8's int8 blocks): its results
    lie further from the dequantised reference than a reordering of sums, by the activations' rounding."""
    return form in ("q8", "q8panels", "int4panels") or (form == "kernel" and weight_layout == "blocks64")


def linear_form_runs_on(form: str, device: torch.device, weight_dtype: torch.dtype = torch.float32) -> bool:
    """oneDNN's matrix product is a CPU kernel for float weights, aten's int8
    kernel (CPU and CUDA) and the blocked reduction are for int8 weights, aten's
    int4 kernel for int4 ones (CPU: the CUDA kernel reads another packing), the
    kernel library's linears for float ones, int8 rows and int4 blocks on a CPU; mm and the
    reduction run anywhere."""
    layouts = {torch.int8: ("rows", "blocks32"), torch.uint8: ("blocks64",)}.get(weight_dtype, (None,))
    if not any(form in LAYOUT_LINEAR_FORMS[layout] for layout in layouts):
        return False
    if form == "int4pack":
        return device.type == "cpu"
    if form in ("kernel", "q8", "q8panels", "int4panels"):
        return device.type == "cpu" and kernels.available()
    if form == "panels":
        return device.type == "cpu" and kernels.available() and weight_dtype == torch.bfloat16
    if form != "onednn":
        return True
    # oneDNN's reduced-precision linear needs instructions some CPUs lack (bf16: AVX512-BW/VL/DQ or
    # AVX-NE-CONVERT); asked of torch, which refuses the weight's reorder on such a CPU.
    reduced = {
        torch.bfloat16: torch.ops.mkldnn._is_mkldnn_bf16_supported,
        torch.float16: torch.ops.mkldnn._is_mkldnn_fp16_supported,
    }
    supported = reduced.get(weight_dtype, lambda: True)
    return device.type == "cpu" and torch.backends.mkldnn.is_available() and supported()


class Linear(nn.Linear):
    """nn.Linear (same parameters and names) that can also run as oneDNN's
    matrix product or as a reduction. Inference only: neither has a backward.

    "onednn" calls oneDNN's linear. A compiled graph names the plain weight
    and the runtime binds it packed in oneDNN's blocked layout (once, at load):
    with few rows, aten's fp32 product on CPU (MKL) reads the weight at a
    fraction of the memory's bandwidth, and oneDNN's on a plain weight reorders
    it on every call (bf16). Eagerly, `packed_linear_weights` packs them here.
    "reduction": with one token per step a linear reads its whole weight for one
    dot product per output; written as `(x * W).sum(-1)`, Inductor emits a
    vectorised, threaded reduction that streams the weight, where the CPU's
    matrix product at one row runs on one thread. Only worth it for a single
    row: for a batch the reduction reads the weight once per row.

    With an int8 weight and its per-row `weight_scale` (quantize.py), "mm" and
    "reduction" read the dequantised weight (int8 × scale, in the activations'
    dtype; Inductor fuses the conversion into the reduction's loads), and
    "int8pack" is aten's weight-only int8 product, the scale applied to its
    output rows; "kernel" the kernel library's (`gpt_kernels::linear_int8`: each
    int8 widened to fp32 in registers, a row's sum scaled once, the bias added
    in the same pass); "q8" the kernel library's with the activations rounded to
    int8 in blocks of 32 and multiplied by the int8 weights in integers
    (`gpt_kernels::linear_int8_q8`: llama.cpp's Q8_0 × Q8_0 scheme, a third of
    the instructions a product at one row); "q8panels" the same products on the
    weights packed in q8 panels where they run (`linear_int8_q8_panels`: four
    inputs of 16 outputs a vector, which each row's broadcast inputs multiply,
    2.5-3x q8's speed at 8 rows). The scale is the buffer
    `weight_scale` that quantize.py adds.
    "blocked" reads the int8 weight laid out in blocks of 32 rows
    (to_row_blocks): the reduction runs over each block's inputs with 32
    outputs in one vector, rows of a batch inside a block, so a block is read
    from memory once per call however many rows.

    With an int4 weight (uint8, two weights a byte, in blocks of 64 rows:
    to_int4_blocks) and its `weight_scale_zero` (a scale and a zero per group
    of inputs and output row) and `weight_group_size` (quantize.py), "mm" reads
    the dequantised weight, "kernel" the kernel library's (`gpt_kernels::linear_int4`:
    the activations rounded to int8 in blocks of 32 and multiplied by the int4
    values in integers, llama.cpp's Q8_0 scheme; the blocks read as stored),
    "int4panels" the same products on the blocks packed in u4 panels where they
    run (`linear_int4_panels`: eight inputs of 16 outputs a vector, no unpacking
    into row order) and "int4pack" aten's CPU int4 kernel (weight-only: each weight dequantised). It is
    called through the quantized op that takes the group size as a tensor: the
    aten op's lowering would add a constant of its own to the compiled graph,
    one the weights file does not hold. The kernel reads the host's packing
    (pack_for_int4pack): an exported graph names the stored weight, which the
    runtime binds packed; eagerly, `packed_linear_weights` packs it once, and
    without it each call packs it again.
    """

    form = "mm"
    packed = None  # {form: the weight packed for it} (PACKED_FORMS), for the forms run eagerly

    def forward(self, x):
        if self.weight.dtype == torch.int8:
            return self._forward_int8(x)
        if self.weight.dtype == torch.uint8:
            return self._forward_int4(x)
        if self.form == "mm":
            return super().forward(x)
        if self.form == "kernel" or (self.form == "panels" and not fits_panels(self.weight)):
            return torch.ops.gpt_kernels.linear(x, self.weight, self.bias)
        if self.form == "panels":
            return torch.ops.gpt_kernels.linear_panels(x, self._packed_for("panels"), self.bias)
        if self.form == "onednn":
            weight = self.weight if self.packed is None else self.packed["onednn"]
            return torch.ops.mkldnn._linear_pointwise(x, weight, self.bias, "none", [], "")
        # as_strided pins x as a stored buffer; otherwise Inductor inlines x's
        # producer (layer norm, GELU) and recomputes it for every output row.
        x = x.as_strided(x.shape, x.stride())
        y = (x.unsqueeze(-2) * self.weight).sum(-1)
        return y if self.bias is None else y + self.bias

    def _forward_int8(self, x):
        scale = self.weight_scale
        if self.weight.dim() == 3:
            y = self._forward_row_blocks(x, scale)
        elif self.form == "int8pack":
            rows = x.reshape(-1, x.shape[-1])
            y = torch._weight_int8pack_mm(rows, self.weight, scale).view(*x.shape[:-1], -1)
        elif self.form == "kernel":
            return torch.ops.gpt_kernels.linear_int8(x, self.weight, scale, self.bias)
        elif self.form == "q8" or (self.form == "q8panels" and not fits_q8_panels(self.weight)):
            return torch.ops.gpt_kernels.linear_int8_q8(x, self.weight, scale, self.bias)
        elif self.form == "q8panels":
            return torch.ops.gpt_kernels.linear_int8_q8_panels(x, self._packed_for("q8panels"), scale, self.bias)
        elif self.form == "reduction":
            x = x.as_strided(x.shape, x.stride())  # as the float reduction: x stays one stored buffer
            y = (x.unsqueeze(-2) * self.weight.to(x.dtype)).sum(-1) * scale
        elif self.form == "mm":
            y = F.linear(x, self.weight.to(x.dtype) * scale.unsqueeze(-1))
        else:
            raise ValueError(f"linear form {self.form!r} has no kernel for int8 rows")
        return y if self.bias is None else y + self.bias

    def _forward_row_blocks(self, x, scale):
        blocks, cols, block_rows = self.weight.shape
        if self.form == "mm":
            # Dequantised as (cols, rows): each block's runs of 32 rows stay whole, where (rows, cols) would
            # transpose every block.
            w = self.weight.permute(1, 0, 2).reshape(cols, blocks * block_rows)[:, : self.out_features]
            return x @ (w.to(x.dtype) * scale)
        if self.form != "blocked":
            raise ValueError(f"linear form {self.form!r} has no kernel for int8 row blocks")
        rows = x.reshape(-1, cols)
        rows = rows.as_strided(rows.shape, rows.stride())  # one stored buffer, as the reduction's x
        # (blocks, rows, 32), summed over the inputs in fp32: the block's loop is outermost.
        y = (rows.view(1, -1, cols, 1).float() * self.weight.float().view(blocks, 1, cols, block_rows)).sum(2)
        y = y.permute(1, 0, 2).reshape(rows.shape[0], blocks * block_rows)[:, : self.out_features]
        return (y.to(x.dtype) * scale).view(*x.shape[:-1], -1)

    def _forward_int4(self, x):
        if self.form == "int4pack":
            rows = x.reshape(-1, x.shape[-1])
            weight = self._packed_for("int4pack")
            pairs = from_int4_pair_blocks(self.weight_scale_zero)  # group-major, a copy a call
            y = torch.ops.quantized.int4mm_packed_weight_cpu(rows, weight, self.weight_group_size, pairs)
            y = y[:, : self.out_features].view(*x.shape[:-1], -1)
        elif self.form == "kernel":
            return torch.ops.gpt_kernels.linear_int4(
                x, self.weight, self.weight_scale_zero, self.out_features, self.bias
            )
        elif self.form == "int4panels":
            return torch.ops.gpt_kernels.linear_int4_panels(
                x, self._packed_for("int4panels"), self.weight_scale_zero, self.out_features, self.bias
            )
        elif self.form == "mm":
            y = F.linear(x, dequantize_int4(self.weight, self.weight_scale_zero, self.out_features, x.dtype))
        else:
            raise ValueError(f"linear form {self.form!r} has no kernel for int4 weights")
        return y if self.bias is None else y + self.bias

    def _packed_for(self, form: str) -> torch.Tensor:
        """The weight `form` reads: the packed copy of packed_linear_weights (eagerly or under torch.compile, as the
        compile measures), in an exported graph the stored one, which the runtime binds packed, or else one packed
        for this call. The copy is looked for first: under torch.compile `torch.compiler.is_exporting()` is true as
        well, and the measured graphs read the stored weight as if it were packed."""
        if self.packed is not None and form in self.packed:
            return self.packed[form]
        if torch.compiler.is_exporting():
            return self.weight
        return pack_linear_weight(self.weight, form)


def fits_panels(weight: torch.Tensor) -> bool:
    """Whether the panels form packs `weight`: bf16 with its rows a multiple of a panel's 16."""
    return weight.dtype == torch.bfloat16 and weight.dim() == 2 and weight.shape[0] % PANEL_ROWS == 0


def pack_for_panels(weight: torch.Tensor) -> torch.Tensor:
    """A bf16 linear weight in the kernel library's panels (the same shape and dtype, its bytes reordered), as
    runtime/exec/packed_weights.cpp packs it."""
    kernels.load()  # registered before the first call, whatever ran before
    return torch.ops.gpt_kernels.pack_linear_panels(weight.detach())


def fits_q8_panels(weight: torch.Tensor) -> bool:
    """Whether the q8panels form packs `weight`: int8 rows with K a multiple of the activations' blocks of 32."""
    return weight.dtype == torch.int8 and weight.dim() == 2 and weight.shape[1] % 32 == 0


def pack_for_q8_panels(weight: torch.Tensor) -> torch.Tensor:
    """int8 linear rows in the kernel library's q8 panels ((N, K) uint8, the whole panels' bytes w + 128 reordered,
    rows past the last whole panel as stored), as runtime/exec/packed_weights.cpp packs them."""
    kernels.load()  # registered before the first call, whatever ran before
    return torch.ops.gpt_kernels.pack_linear_q8_panels(weight.detach())


def pack_for_int4_panels(weight: torch.Tensor) -> torch.Tensor:
    """int4 "blocks64" weights in the kernel library's u4 panels (the same shape and bytes, each panel's eight inputs
    of 16 outputs a 64-byte run), as runtime/exec/packed_weights.cpp packs them."""
    kernels.load()  # registered before the first call, whatever ran before
    return torch.ops.gpt_kernels.pack_linear_int4_panels(weight.detach())


def pack_for_onednn(weight: torch.Tensor) -> torch.Tensor:
    """A linear's weight in the layout oneDNN's product reads fastest (opaque,
    for its linear only), as runtime/exec/packed_weights.cpp packs it."""
    return torch.ops.mkldnn._reorder_linear_weight(weight.detach())


def pack_linear_weight(weight: torch.Tensor, form: str) -> torch.Tensor:
    """The copy of a linear's weight that the packed form `form` (PACKED_FORMS) reads."""
    packers = {
        "int4pack": pack_for_int4pack,
        "onednn": pack_for_onednn,
        "panels": pack_for_panels,
        "q8panels": pack_for_q8_panels,
        "int4panels": pack_for_int4_panels,
    }
    if form not in packers:
        raise ValueError(f"linear form {form!r} reads no packed weight")
    return packers[form](weight)


@contextmanager
def packed_linear_weights(gpt: nn.Module, forms: tuple = PACKED_FORMS):
    """Runs the packed forms among `forms` (PACKED_FORMS) on packed weights, as the runtime's graphs do: each
    linear's weight packed for each of them that reads it."""
    linears = [m for m in gpt.modules() if isinstance(m, Linear)]
    int4 = {"int4pack", "int4panels"}
    for linear in linears:
        if linear.weight.dtype == torch.uint8:
            reads = int4
        elif linear.weight.dtype == torch.int8:
            reads = {"q8panels"} if fits_q8_panels(linear.weight) else set()
        else:
            reads = {"onednn"} | ({"panels"} & {f for f in forms if fits_panels(linear.weight)})
        linear.packed = {form: pack_linear_weight(linear.weight, form) for form in forms if form in reads}
    try:
        yield
    finally:
        for linear in linears:
            linear.packed = None


def linear_weight_names(gpt: nn.Module, form: str) -> list[str]:
    """Names of the weights the runtime packs for the packed form `form` (PACKED_FORMS): every linear's, but for
    panels those it packs (fits_panels) of linears in that form (a tied head reads the embedding's rows as stored),
    for q8panels those it packs (fits_q8_panels)."""
    fits = {
        "panels": lambda m: m.form == "panels" and fits_panels(m.weight),
        "q8panels": lambda m: fits_q8_panels(m.weight),
    }
    return [
        f"{name}.weight"
        for name, m in gpt.named_modules()
        if isinstance(m, Linear) and fits.get(form, lambda m: True)(m)
    ]
