"""The graphs an artifact holds, as torch.export entry points.

Each entry module registers the GPT's own submodules, so the exported graph's
constants carry nanoGPT's parameter names: the runtime binds one weights file
to every graph by name.
"""

from contextlib import contextmanager, nullcontext

import torch
import torch.nn as nn
from torch.export import Dim, ExportedProgram

from gpt_aot.model.attention import ONE_QUERY_KINDS, attention_context, several_queries_kind
from gpt_aot.model.gpt import GPT
from gpt_aot.model.linear import PACKED_FORMS

MAX_BATCH = 64
GRAPH_ORDER = ("prefill", "decode", "decode_one", "extend", "mixed")


class EntryModule(nn.Module):
    """Base of every exported graph: the GPT's parameters under nanoGPT's names, each tensor once."""

    def __init__(self, gpt: GPT):
        super().__init__()
        # Without wte while it is lm_head.weight (tied): one tensor must be one graph input.
        tied = gpt.transformer.wte.weight is gpt.lm_head.weight
        self.transformer = nn.ModuleDict({k: v for k, v in gpt.transformer.items() if k != "wte" or not tied})
        self.lm_head = gpt.lm_head
        self._gpt = (gpt,)  # a tuple keeps the GPT itself unregistered


class PrefillGraph(EntryModule):
    def forward(self, idx, caches):
        return self._gpt[0].prefill(idx, caches)


class DecodeGraph(EntryModule):
    def forward(self, idx, pos, caches):
        return self._gpt[0].decode(idx, pos, caches)


class ExtendGraph(EntryModule):
    def forward(self, idx, start, caches):
        return self._gpt[0].extend(idx, start, caches)


class MixedGraph(EntryModule):
    def forward(self, idx, pos, seq, last, caches):
        return self._gpt[0].mixed(idx, pos, seq, last, caches)


@contextmanager
def untied_lm_head(gpt: GPT):
    """The embedding reads its own copy of the tied weight: where the runtime
    binds lm_head's weight packed (for oneDNN or the host's int4 kernel:
    PACKED_FORMS), only the linear may read it. The graph then names both; the
    weights file holds one tensor, which the embedding reads as stored."""
    tied = gpt.lm_head.weight
    if gpt.transformer.wte.weight is not tied:
        yield
        return
    gpt.transformer.wte.weight = nn.Parameter(tied.detach().clone(), requires_grad=False)
    gpt.embedding_untied = True
    try:
        yield
    finally:
        gpt.transformer.wte.weight = tied
        del gpt.embedding_untied


def _tensor_sig(name, dtype, shape):
    return {"name": name, "dtype": str(dtype).removeprefix("torch."), "shape": list(shape)}


def graph_specs(gpt: GPT) -> dict:
    """Input/output signatures, with symbolic dims named as the manifest names them."""
    c = gpt.config
    dt = gpt.dtype

    # The cache (n_layer, 2, batch, n_head, block_size + 1, head_dim) goes in as its
    # layer_caches views of `positions`: layer 0's k and v, then layer 1's, ...
    def spec(batch, positions, leading: list) -> dict:
        kv = [
            _tensor_sig(f"{kind}_cache.{layer}", dt, [batch, c.n_head, positions, c.head_dim])
            for layer in range(c.n_layer)
            for kind in ("k", "v")
        ]
        return {
            "inputs": [*leading, *kv],
            "outputs": [_tensor_sig("logits", dt, [batch, c.padded_vocab_size])],
            "mutates": [t["name"] for t in kv],
        }

    def decode_inputs(batch):
        return [_tensor_sig("idx", torch.int64, [batch, 1]), _tensor_sig("pos", torch.int64, [batch])]

    return {
        "prefill": spec("batch", c.block_size, [_tensor_sig("idx", torch.int64, ["batch", "seq"])]),
        "decode": spec("batch", "span", decode_inputs("batch")),
        "decode_one": spec(1, "span", decode_inputs(1)),
        "extend": spec(
            "batch",
            "span",
            [_tensor_sig("idx", torch.int64, ["batch", "seq"]), _tensor_sig("start", torch.int64, ["batch"])],
        ),
        "mixed": {
            **spec(
                "batch",
                "span",
                [
                    _tensor_sig("idx", torch.int64, ["tokens", 1]),
                    _tensor_sig("pos", torch.int64, ["tokens"]),
                    _tensor_sig("seq", torch.int64, ["tokens"]),
                    _tensor_sig("last", torch.int64, ["drawn"]),
                ],
            ),
            "outputs": [_tensor_sig("logits", dt, ["drawn", c.padded_vocab_size])],
        },
    }


def export_graphs(
    gpt: GPT,
    attention: dict[str, str],
    max_batch: int = MAX_BATCH,
    linear: dict[str, str] | None = None,
    only: tuple[str, ...] | None = None,
) -> dict[str, ExportedProgram]:
    """Export prefill and decode with dynamic batch and prompt length, each with
    its attention kind ({"prefill": kind, "decode": kind}) pinned while tracing
    and its linears in the form `linear` names for it (mm if none). With
    linear["decode_one"], also decode_one: decode of a single sequence, batch 1
    fixed, decode's kind (the runtime's graph whenever one row steps). With
    linear["extend"], also extend: several tokens appended to each row's cache
    (dynamic batch, length and span), decode's kind (its call is decode's, a mask
    over the cache, with more queries; math where decode's kind takes one query,
    several_queries_kind) and prefill's kind of linears (several tokens a row). With
    linear["mixed"], also mixed: tokens of any sequences, several of one included,
    each to its own cache row and position (decode steps beside prompt pieces; up to
    max_batch + block_size tokens over max_batch rows), decode's kind, which must
    read the cache in place for that (ONE_QUERY_KINDS).
    The model is left with mm linears and decode's kind when decode_one or extend
    is exported (as compile_artifact does), else prefill's. `only` names the graphs to export (default: all)."""
    c = gpt.config
    if c.block_size < 3:  # span's range 2..block_size must hold more than one value to stay dynamic
        raise ValueError(f"block_size {c.block_size} is too small to compile: it must be at least 3")
    device = gpt.lm_head.weight.device
    batch = Dim("batch", min=1, max=max_batch)
    seq = Dim("seq", min=1, max=c.block_size)
    span = Dim("span", min=2, max=c.block_size)  # decode's cache positions: more than every row's pos

    # Example sizes above 1 so no dimension is specialised to a constant, with the
    # strides of the runtime's views (layer_caches of new_kv_cache): compiled graphs
    # assume the strides they were traced with. Each view of its own cache, not of
    # one: export would tie views' sizes to their base's and specialise the batch.
    # The runtime's views do not overlap.
    def caches(rows: int, positions: int) -> list:
        layer = gpt.new_kv_cache(rows)[0, 0]  # (rows, n_head, block_size + 1, head_dim)
        return [layer.clone()[:, :, :positions] for _ in range(2 * c.n_layer)]

    example_span = max(2, c.block_size // 2)
    idx = torch.zeros(2, min(4, c.block_size), dtype=torch.int64, device=device)
    step = torch.zeros(2, 1, dtype=torch.int64, device=device)
    pos = torch.tensor([1, 0], dtype=torch.int64, device=device)  # rows at different positions
    linear = linear or {}
    # name -> (entry module class, example inputs, dynamic dims, attention kind, linear form)
    entries = {
        "decode": (
            DecodeGraph,
            (step, pos, caches(2, example_span)),
            ({0: batch}, {0: batch}, [{0: batch, 2: span}] * (2 * c.n_layer)),
            attention["decode"],
            linear.get("decode", "mm"),
        ),
        "prefill": (
            PrefillGraph,
            (idx, caches(2, c.block_size)),
            ({0: batch, 1: seq}, [{0: batch}] * (2 * c.n_layer)),
            attention["prefill"],
            linear.get("prefill", "mm"),
        ),
    }
    if "decode_one" in linear:
        one = (step[:1].clone(), pos[:1].clone(), caches(1, example_span))
        dims = (None, None, [{2: span}] * (2 * c.n_layer))
        entries["decode_one"] = (DecodeGraph, one, dims, attention["decode"], linear["decode_one"])
    if "extend" in linear:
        # Rows at different positions, each new token within the span.
        new = idx[:, : min(idx.shape[1], c.block_size - 1)].clone()
        start = torch.tensor([1, 0], dtype=torch.int64, device=device)
        ext_span = min(c.block_size, max(example_span, new.shape[1] + 1))
        dims = ({0: batch, 1: seq}, {0: batch}, [{0: batch, 2: span}] * (2 * c.n_layer))
        kind, form = several_queries_kind(attention["decode"]), linear["extend"]
        entries["extend"] = (ExtendGraph, (new, start, caches(2, ext_span)), dims, kind, form)
    if "mixed" in linear:
        if attention["decode"] not in ONE_QUERY_KINDS:
            raise ValueError(
                f"the mixed graph needs a decode attention that reads the cache in place, not {attention['decode']!r}"
            )
        tokens = Dim("tokens", min=1, max=max_batch + c.block_size)
        drawn = Dim("drawn", min=1, max=max_batch)
        # Four tokens: a step of row 0 and three of row 1 (a piece, then its last token drawn), positions below
        # the smallest span; three drawn, so no two dynamic sizes are equal while tracing.
        mixed_span = max(2, c.block_size // 2)
        example = (
            torch.zeros(4, 1, dtype=torch.int64, device=device),
            torch.tensor([1, 0, 1, 0], dtype=torch.int64, device=device),
            torch.tensor([0, 1, 1, 0], dtype=torch.int64, device=device),
            torch.tensor([0, 2, 3], dtype=torch.int64, device=device),
            caches(2, mixed_span),
        )
        dims = ({0: tokens}, {0: tokens}, {0: tokens}, {0: drawn}, [{0: batch, 2: span}] * (2 * c.n_layer))
        entries["mixed"] = (MixedGraph, example, dims, attention["decode"], linear["mixed"])
    programs = {}
    with torch.no_grad():
        for name, (graph, args, dims, kind, form) in entries.items():
            if only is not None and name not in only:
                continue
            gpt.set_attention(kind)
            gpt.set_linear_form(form)
            untie = gpt.lm_head.form in PACKED_FORMS  # panels leave a tied head unpacked (GPT.set_linear_form)
            with attention_context(kind), untied_lm_head(gpt) if untie else nullcontext():
                programs[name] = torch.export.export(graph(gpt), args, dynamic_shapes=dims)
    gpt.set_linear_form("mm")
    gpt.set_attention(attention["decode"] if {"decode_one", "extend", "mixed"} & set(linear) else attention["prefill"])
    return {name: programs[name] for name in GRAPH_ORDER if name in programs}
