"""The panels linear form (model/linear.py): the kernel library's linear over bf16 weights packed in panels of 16
outputs, packed where they run (runtime/exec/packed_weights.cpp). Eagerly against the kernel form on the stored
weights and against PyTorch's own bf16 model; which weights it packs (a tied head stays as stored); where it is
offered; and the tiny-bf16-panels fixture's compiled graphs on the packed copies against the eager model."""

import json

import torch
from quantized_checks import assert_close_to, assert_eager_model_matches

from gpt_aot.artifact.loader import ArtifactGraphs
from gpt_aot.compiler import linear_pick, measure
from gpt_aot.model.linear import Linear, fits_panels, linear_form_runs_on, linear_weight_names, pack_for_panels

GRAPHS = ("prefill", "decode", "decode_one", "extend")
# Compiled against eager in bf16: Inductor rounds other intermediates to bf16 than eager does, so a few bf16 steps
# (2⁻⁸ relative) of the largest logit; measured 2 steps on tiny-bf16-panels.
COMPILED_FRACTION = 2e-2


def bf16_tiny(fixtures, form: str):
    model = fixtures.tiny_model("math").to(torch.bfloat16)
    model.set_linear_form(form)
    return model


def linear_names(model) -> set[str]:
    return {f"{name}.weight" for name, m in model.named_modules() if isinstance(m, Linear)}


def test_panels_form_equals_the_kernel_form_and_pytorchs_bf16_model(fixtures):
    """Prefill, batched decode and decode_one of the bf16 tiny model: the panels form (weights packed per call, as
    no packed copies are bound) within bf16's rounding of the kernel form and of the mm form (PyTorch's linear)."""
    panels = bf16_tiny(fixtures, "panels")
    assert all(fits_panels(m.weight) for m in panels.modules() if isinstance(m, Linear))  # 96, 32, 128 and 32 rows
    assert_eager_model_matches(panels, bf16_tiny(fixtures, "kernel"), torch.bfloat16)
    assert_eager_model_matches(panels, bf16_tiny(fixtures, "mm"), torch.bfloat16)


def test_panels_pack_every_linear_but_a_tied_head(fixtures):
    """A tied head reads the embedding's rows as stored (the kernel form): a packed copy would add its bytes."""
    model = bf16_tiny(fixtures, "panels")
    assert model.lm_head.weight is model.transformer.wte.weight
    assert model.lm_head.form == "kernel"
    assert set(linear_weight_names(model, "panels")) == linear_names(model) - {"lm_head.weight"}
    assert set(linear_weight_names(model, "onednn")) == linear_names(model)
    # The packing is a reordering of the same bytes, in the same shape.
    w = model.transformer.h[0].mlp.c_fc.weight
    packed = pack_for_panels(w)
    assert packed.shape == w.shape and packed.dtype == torch.bfloat16
    assert torch.equal(packed.flatten().sort().values, w.detach().flatten().sort().values)
    assert not torch.equal(packed, w)


def test_panels_are_offered_for_bf16_weights_on_the_cpu_only(fixtures):
    cpu = torch.device("cpu")
    assert linear_form_runs_on("panels", cpu, torch.bfloat16)
    assert not linear_form_runs_on("panels", cpu, torch.float32)
    assert not linear_form_runs_on("panels", torch.device("cuda"), torch.bfloat16)
    for graph in ("prefill", "decode", "decode_one"):
        assert "panels" not in linear_pick.graph_linear_forms(fixtures.tiny_model("math"), graph), graph
        assert "panels" in linear_pick.graph_linear_forms(bf16_tiny(fixtures, "mm"), graph), graph


def test_compiled_panels_graphs_read_packed_copies_and_equal_the_eager_model(artifacts, fixtures):
    """tiny-bf16-panels: every graph's linears the panels form, each linear weight but the tied head listed packed,
    the graphs calling the panel linear and (for the head) the row kernel; bound to packed copies as the runtime
    binds them, its prefill and decode steps equal the eager panels model within bf16's rounding."""
    directory = artifacts / "tiny-bf16-panels" / "cpu"
    manifest = json.loads((directory / "manifest.json").read_text())
    model = bf16_tiny(fixtures, "panels")
    for graph in GRAPHS:
        linear = manifest["graphs"][graph]["linear"]
        assert linear["form"] == "panels", graph
        assert set(linear["packed"]) == linear_names(model) - {"lm_head.weight"}, graph
    assert manifest["kernels"]["operators"] == ["gpt_kernels::linear", "gpt_kernels::linear_panels"]
    graphs = ArtifactGraphs(directory)
    idx = torch.randint(0, fixtures.CONFIG.vocab_size, (3, 7), generator=torch.Generator().manual_seed(3))
    kv_c, kv_e = graphs.new_kv_cache(3), model.new_kv_cache(3)
    with torch.no_grad():
        assert_close_to(
            graphs.prefill(idx, kv_c), model.prefill(idx, kv_e), torch.bfloat16, "prefill", COMPILED_FRACTION
        )
        for t in range(7, 11):
            tok, pos = torch.full((3, 1), t), torch.tensor([t, t + 3, t - 5])
            assert_close_to(
                graphs.decode(tok, pos, kv_c),
                model.decode(tok, pos, kv_e),
                torch.bfloat16,
                f"step {t}",
                COMPILED_FRACTION,
            )
        one = torch.full((1, 1), 5)
        assert_close_to(
            graphs.decode(one, torch.tensor([7]), kv_c[:, :, :1].contiguous()),
            model.decode(one, torch.tensor([7]), kv_e[:, :, :1].contiguous()),
            torch.bfloat16,
            "decode_one",
            COMPILED_FRACTION,
        )


def test_panels_pick_is_measured_among_the_bf16_candidates(fixtures):
    """On bf16 weights the compile measures panels beside the other forms, on packed copies, within bf16's
    tolerance of mm (measure.TOLERANCE: a pick may take it)."""
    model = bf16_tiny(fixtures, "mm")
    forms = tuple(f for f in linear_pick.graph_linear_forms(model, "decode") if f != "onednn")
    assert "panels" in forms
    candidates = linear_pick.measure_decode_linear(model, forms, rows=3)
    assert candidates["panels"]["runs"] and candidates["panels"]["ms"] > 0
    assert candidates["panels"]["max_abs_err"] <= measure.TOLERANCE[torch.bfloat16], candidates["panels"]
    assert model.linear_form == "mm" and all(m.packed is None for m in model.modules() if isinstance(m, Linear))


def test_panels_measured_compiled_read_the_packed_copies(fixtures):
    """decode_one's candidates are measured compiled when a reduction is among them (Inductor's code): there too the
    panels form reads the packed copies. Under torch.compile `torch.compiler.is_exporting()` is true, and a form that
    took it for an export read the stored weights as panels (logits off by about the logits themselves)."""
    model = bf16_tiny(fixtures, "mm")
    candidates = linear_pick.measure_decode_linear(model, ("mm", "reduction", "panels"), rows=1)
    assert candidates["panels"]["runs"], candidates["panels"]
    assert candidates["panels"]["max_abs_err"] <= measure.TOLERANCE[torch.bfloat16], candidates["panels"]
