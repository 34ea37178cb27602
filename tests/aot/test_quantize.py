"""Weight-only int8 (quantize.py): the scheme, every int8 linear form against the
eager reference (quantize → dequantize → the same model in PyTorch), the compiled
int8 graphs against it, and what an int8 artifact records."""

import json

import pytest
import torch
from quantized_checks import (
    FP32_TOL,
    ROUNDED_ACTIVATIONS_FRACTION,
    assert_artifact_stores,
    assert_compiled_graphs_match,
    assert_eager_model_matches,
    assert_exact_but_rounded,
)

from gpt_aot.artifact.loader import ArtifactGraphs
from gpt_aot.compiler import linear_pick, pipeline
from gpt_aot.compiler.target import resolve
from gpt_aot.compiler.training import OptimizerConfig
from gpt_aot.model.gpt import GPT, GPTConfig
from gpt_aot.model.linear import Linear, from_row_blocks, rounds_activations, to_row_blocks
from gpt_aot.model.quantize import dequantized, quantize_int8, quantize_rows, set_int8_layout, weight_bytes

# Over int8 rows (kernel: the kernel library's linear_int8; q8: its linear_int8_q8, which rounds the activations;
# q8panels: the same on the weights packed in q8 panels).
INT8_FORMS = ("mm", "reduction", "int8pack", "kernel", "q8", "q8panels")
ROUNDED_FORMS = ("q8", "q8panels")
# Each layout with the forms that read it (linear.LAYOUT_LINEAR_FORMS).
LAYOUT_FORMS = [("rows", f) for f in INT8_FORMS] + [("blocks32", "mm"), ("blocks32", "blocked")]
# Rows that are no multiple of 32 (48 wide: c_attn 144 rows, lm_head 128): the last block is padded.
ODD_CONFIG = GPTConfig(block_size=16, vocab_size=70, n_layer=2, n_head=2, n_embd=48, bias=True)


def quantized_tiny(fixtures, dtype=torch.float32) -> GPT:
    model = fixtures.tiny_model("math")
    return quantize_int8(model, dtype).to(dtype=dtype)


def test_rows_are_quantized_symmetrically_within_half_a_step():
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(6, 40, generator=gen) * torch.tensor([1e-3, 0.02, 1.0, 30.0, 0.5, 0.0]).unsqueeze(1)
    for scale_dtype in (torch.float32, torch.bfloat16):
        q, scale = quantize_rows(w, scale_dtype)
        assert q.dtype == torch.int8 and scale.dtype == scale_dtype and scale.shape == (6,)
        assert int(q.abs().max()) <= 127
        assert torch.equal(q[5], torch.zeros(40, dtype=torch.int8)) and scale[5] == 1  # the padding's zero row
        # Each row's largest weight reaches ±127 (±126 when the stored scale rounded up), and every
        # weight is within half a step of its reconstruction.
        assert (q[:5].abs().amax(1) >= 126).all()
        step = scale.float().unsqueeze(1)
        assert ((q.float() * step - w).abs() <= step / 2 * (1 + 1e-6)).all()


def test_quantizing_keeps_names_ties_and_dtype_and_halves_gpt2_124m_bf16():
    config = GPTConfig(vocab_size=50257)  # GPT-2 124M
    model = GPT(config).init_weights(1337)
    bf16_bytes = weight_bytes(model, torch.bfloat16)
    names = set(model.state_dict())
    quantize_int8(model, torch.bfloat16)
    model = model.to(dtype=torch.bfloat16)
    linears = {f"{n}.weight" for n, m in model.named_modules() if isinstance(m, Linear)}
    assert len(linears) == 4 * config.n_layer + 1
    state = model.state_dict()
    assert set(state) == names | {f"{n}_scale" for n in linears}
    assert all(state[n].dtype == torch.int8 for n in linears)
    assert all(state[f"{n}_scale"].dtype == torch.bfloat16 for n in linears)
    assert model.transformer.wte.weight is model.lm_head.weight  # still tied: stored once
    assert model.dtype == torch.bfloat16 and model.new_kv_cache(1).dtype == torch.bfloat16
    int8_bytes = weight_bytes(model, torch.bfloat16)
    assert 0.50 <= int8_bytes / bf16_bytes <= 0.51, (int8_bytes, bf16_bytes)
    with pytest.raises(ValueError, match="already quantized"):
        quantize_int8(model, torch.bfloat16)


def test_row_blocks_hold_32_rows_of_each_input_side_by_side_padded_with_zero_rows():
    q = torch.randint(-127, 128, (70, 40), dtype=torch.int8, generator=torch.Generator().manual_seed(0))
    blocks = to_row_blocks(q)
    assert blocks.shape == (3, 40, 32) and blocks.is_contiguous()
    assert blocks[1, 5, 7] == q[32 + 7, 5] and blocks[2, 39, 5] == q[64 + 5, 39]
    assert torch.equal(blocks[2, :, 6:], torch.zeros(40, 26, dtype=torch.int8))  # rows 70..95
    assert torch.equal(from_row_blocks(blocks, 70), q)


def test_the_layout_changes_the_weights_storage_not_their_values():
    model = quantize_int8(GPT(ODD_CONFIG, "math").init_weights(3), torch.float32)
    rows = {k: v.clone() for k, v in model.state_dict().items()}
    row_bytes = weight_bytes(model, torch.float32)
    assert model.int8_layout == "rows" and model.linear_forms == INT8_FORMS
    set_int8_layout(model, "blocks32")
    assert model.int8_layout == "blocks32" and model.linear_forms == ("mm", "blocked")
    assert model.transformer.h[0].attn.c_attn.weight.shape == (5, 48, 32)  # 144 rows
    assert model.transformer.wte.weight is model.lm_head.weight  # still tied, in blocks
    with pytest.raises(ValueError, match="not one of"):
        model.set_linear_form("int8pack")
    # The padding rows' bytes: 16 rows in each layer's c_attn (144), attn.c_proj and mlp.c_proj (48).
    assert weight_bytes(model, torch.float32) - row_bytes == ODD_CONFIG.n_layer * 16 * (48 + 48 + 192)
    set_int8_layout(model, "rows")
    assert all(torch.equal(v, rows[k]) for k, v in model.state_dict().items())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("layout,form", LAYOUT_FORMS)
@pytest.mark.parametrize("config", ["tiny", "odd"])
def test_each_int8_form_equals_the_dequantized_model(fixtures, dtype, layout, form, config):
    """Prefill of 3 rows, then decode steps of 3 rows at their own positions and of 1 row, in each
    layout; the odd model's rows fill no whole number of blocks (and its 48 and 192 inputs none of q8's
    blocks of 32: q8panels reads those rows as q8 does). q8 and q8panels round the activations: within
    ROUNDED_ACTIVATIONS_FRACTION of the logits."""
    if config == "tiny":
        model = quantized_tiny(fixtures, dtype)
    else:
        model = quantize_int8(GPT(ODD_CONFIG, "math").init_weights(3).eval(), dtype).to(dtype=dtype)
    reference = dequantized(model)
    assert all(p.dtype == dtype for p in reference.parameters())
    set_int8_layout(model, layout)
    model.set_linear_form(form)
    rounded = rounds_activations(form, layout)
    assert_eager_model_matches(model, reference, dtype, ROUNDED_ACTIVATIONS_FRACTION if rounded else None)


def test_the_reference_is_no_copy_of_the_float_model(fixtures):
    """The int8 model is not the float one: the test above compares against quantized weights."""
    model = quantized_tiny(fixtures)
    idx = torch.randint(0, fixtures.CONFIG.vocab_size, (2, 9))
    with torch.no_grad():
        float_logits, _ = fixtures.tiny_model("math")(idx)
        int8_logits, _ = dequantized(model)(idx)
    assert (float_logits - int8_logits).abs().max() > 10 * FP32_TOL


def test_float_and_int8_forms_are_kept_apart(fixtures):
    model = fixtures.tiny_model("math")
    with pytest.raises(ValueError, match="not one of"):
        model.set_linear_form("int8pack")
    quantize_int8(model, torch.float32)
    with pytest.raises(ValueError, match="not one of"):
        model.set_linear_form("onednn")
    assert linear_pick.DECODE_ONE_LINEAR_FORMS["rows"] == INT8_FORMS
    assert linear_pick.BATCHED_LINEAR_FORMS["rows"] == ("mm", "int8pack", "kernel", *ROUNDED_FORMS)
    assert linear_pick.DECODE_ONE_LINEAR_FORMS["blocks32"] == linear_pick.BATCHED_LINEAR_FORMS["blocks32"]
    # decode_one chooses among every layout's forms; its pick sets the layout the other graphs read.
    assert linear_pick.graph_linear_forms(model, "decode_one") == (*INT8_FORMS, "blocked")
    assert linear_pick.graph_linear_forms(model, "prefill") == ("mm", "int8pack", "kernel", *ROUNDED_FORMS)
    assert [linear_pick.int8_layout_for(f) for f in (*INT8_FORMS, "blocked")] == ["rows"] * 6 + ["blocks32"]


def test_int8_linear_forms_are_measured_against_mm(fixtures):
    model = quantized_tiny(fixtures)
    cpu = resolve("cpu", "auto", "fp32")
    pick = linear_pick.choose_linear(model, cpu, "auto", "math", "decode")
    batched = {"mm", "int8pack", "kernel", *ROUNDED_FORMS}
    assert set(pick["candidates"]) == batched and pick["rows"] == 8
    assert_exact_but_rounded(pick, ROUNDED_FORMS)
    # prefill's pick is its own, measured on a prompt (the whole tiny context here)
    pick = linear_pick.choose_linear(model, cpu, "auto", "math", "prefill")
    assert pick["tokens"] == fixtures.CONFIG.block_size and set(pick["candidates"]) == batched
    assert_exact_but_rounded(pick, ROUNDED_FORMS)
    with pytest.raises(ValueError, match="not one of"):
        linear_pick.choose_linear(model, cpu, "auto", "math", "train_step")
    # decode_one measures the rows layout's forms (the reduction compiled) and the blocked form in its layout,
    # each against mm's logits, then leaves the weights as rows.
    pick = linear_pick.choose_linear(model, cpu, "auto", "math", "decode_one")
    candidates = pick["candidates"]
    assert set(candidates) == {*INT8_FORMS, "blocked"} and model.int8_layout == "rows"
    assert candidates["mm"]["max_abs_err"] == 0.0 and all(c["ms"] > 0 for c in candidates.values())
    assert_exact_but_rounded(pick, ROUNDED_FORMS)
    set_int8_layout(model, "blocks32")
    for graph in ("decode", "prefill"):
        pick = linear_pick.choose_linear(model, cpu, "auto", "math", graph)
        assert set(pick["candidates"]) == {"mm", "blocked"}, graph
        assert all(c["runs"] and c["max_abs_err"] < FP32_TOL for c in pick["candidates"].values())
    with pytest.raises(ValueError, match="not one of"):
        linear_pick.choose_linear(model, cpu, "int8pack", "math", "decode")


@pytest.mark.parametrize(
    "name,expected",
    [
        ("tiny-int8", ("int8pack", "int8pack", "reduction")),
        ("tiny-int8-blocks", ("blocked",) * 3),
        ("tiny-int8-kernel", ("kernel",) * 3),
    ],
)
def test_compiled_int8_graphs_equal_the_eager_int8_reference(artifacts, fixtures, name, expected):
    """Each int8 artifact's prefill, batched decode and decode_one in their forms (tiny-int8-kernel: the kernel
    library's int8 linear in all three), at batch 3 and 1, prompt length 7 and rows at their own positions (none
    an export example)."""
    int8_graphs = ArtifactGraphs(artifacts / name / "cpu")
    manifest = json.loads((artifacts / name / "cpu" / "manifest.json").read_text())
    assert tuple(manifest["graphs"][g]["linear"]["form"] for g in ("prefill", "decode", "decode_one")) == expected
    assert_compiled_graphs_match(int8_graphs, dequantized(quantized_tiny(fixtures)), fixtures.CONFIG.vocab_size)


def test_compiled_q8_graphs_equal_the_eager_q8_model_and_the_golden_allows_its_rounding(artifacts, fixtures):
    """tiny-int8-q8's graphs (all the kernel library's int8 linear with int8 activations: decode_one's on the rows
    as stored, prefill's and decode's on copies packed in q8 panels, every linear's weight listed packed) equal the
    eager model in the same forms within FP32_TOL (the same integer products: only the order of sums moves), and
    the dequantised model within its rounding; its golden vector is the dequantised model's, with an atol widened to
    cover the rounded activations (golden.golden_tolerance)."""
    directory = artifacts / "tiny-int8-q8" / "cpu"
    manifest = json.loads((directory / "manifest.json").read_text())
    forms = {g: manifest["graphs"][g]["linear"] for g in ("prefill", "decode", "decode_one")}
    assert {g: linear["form"] for g, linear in forms.items()} == {
        "prefill": "q8panels",
        "decode": "q8panels",
        "decode_one": "q8",
    }
    model = quantized_tiny(fixtures)
    linears = {f"{name}.weight" for name, m in model.named_modules() if isinstance(m, Linear)}
    assert set(forms["prefill"]["packed"]) == set(forms["decode"]["packed"]) == linears
    assert "packed" not in forms["decode_one"]
    assert manifest["kernels"]["operators"] == ["gpt_kernels::linear_int8_q8", "gpt_kernels::linear_int8_q8_panels"]
    model.set_linear_form("q8panels")  # decode_one's q8 reads the same integers as the panels: one eager model
    assert_compiled_graphs_match(ArtifactGraphs(directory), model, fixtures.CONFIG.vocab_size)
    assert_eager_model_matches(
        model, dequantized(quantized_tiny(fixtures)), torch.float32, ROUNDED_ACTIVATIONS_FRACTION
    )
    plain = json.loads((artifacts / "tiny-int8" / "cpu" / "manifest.json").read_text())
    assert plain["golden"]["atol"] == FP32_TOL < manifest["golden"]["atol"] < 5e-2


@pytest.mark.parametrize("name,layout", [("tiny-int8", "rows"), ("tiny-int8-blocks", "blocks32")])
def test_an_int8_artifact_records_its_quantization_and_stores_int8_weights(artifacts, fixtures, name, layout):
    model = set_int8_layout(quantized_tiny(fixtures), layout)
    record = assert_artifact_stores(artifacts / name / "cpu", model, fixtures.tiny_model("math"))
    assert record["scheme"] == "int8" and record["granularity"] == "per output channel, symmetric"
    assert record["layout"] == layout


def test_a_quantized_artifact_cannot_hold_training_graphs(tmp_path, fixtures):
    with pytest.raises(ValueError, match="inference only"):
        pipeline.compile_artifact(
            fixtures.tiny_model("math"),
            resolve("cpu", "auto", "fp32"),
            tmp_path / "cpu",
            name="t",
            tokenizer=fixtures.tokenizer(),
            train=OptimizerConfig(),
            quantize="int8",
        )
    assert not (tmp_path / "cpu").exists()
