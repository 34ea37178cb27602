"""Compiled artifacts: manifest, hashes, kernel choice, and logits against eager PyTorch."""

import json
import math
import re
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from gpt_aot.artifact.loader import ArtifactGraphs
from gpt_aot.artifact.manifest import FORMAT_NAME, WITHOUT_KERNELS_FORMAT_VERSION, sha256_file
from gpt_aot.compiler import attention_pick, inductor, linear_pick, measure, packages, pipeline
from gpt_aot.compiler.target import resolve

KINDS = ("naive", "math", "flash")
TOL = 1e-4  # fp32: compiled kernels reorder reductions, nothing more


def artifact_dir(artifacts: Path, kind: str) -> Path:
    return artifacts / f"tiny-{kind}" / "cpu"


@pytest.fixture(scope="module")
def loaded(artifacts):
    return {kind: ArtifactGraphs(artifact_dir(artifacts, kind)) for kind in KINDS}


def test_manifest_records_format_target_model_and_every_file_hash(artifacts, fixtures):
    directory = artifact_dir(artifacts, "flash")
    manifest = json.loads((directory / "manifest.json").read_text())
    assert manifest["format"] == FORMAT_NAME and manifest["format_version"] == WITHOUT_KERNELS_FORMAT_VERSION
    assert manifest["torch_version"] == torch.__version__
    assert manifest["target"]["device"] == "cpu" and manifest["target"]["isa"]
    assert manifest["dtype"] == "float32"
    assert manifest["attention"]["backend"] == "flash"
    assert manifest["model"]["vocab_size"] == fixtures.CONFIG.vocab_size
    assert manifest["model"]["padded_vocab_size"] == 128
    assert manifest["weights"]["tied"] == {"lm_head.weight": "transformer.wte.weight"}
    on_disk = {p.name for p in directory.iterdir()} - {"manifest.json"}
    assert set(manifest["files"]) == on_disk
    for name, entry in manifest["files"].items():
        assert sha256_file(directory / name) == entry["sha256"]
        assert (directory / name).stat().st_size == entry["size"]
    assert manifest["graphs"]["decode_one"]["max_batch"] == 1
    assert manifest["graphs"]["decode_one"]["linear"] == {"form": "reduction", "selected_by": "user"}
    from gpt_aot.model.linear import Linear

    linear_weights = [f"{n}.weight" for n, m in fixtures.tiny_model("flash").named_modules() if isinstance(m, Linear)]
    assert len(linear_weights) == 4 * fixtures.CONFIG.n_layer + 1
    for graph in ("prefill", "decode", "extend"):
        pick = {"form": "onednn", "selected_by": "user", "packed": linear_weights}
        assert manifest["graphs"][graph]["linear"] == pick
    assert [i["shape"] for i in manifest["graphs"]["decode_one"]["inputs"][:2]] == [[1, 1], [1]]
    assert [i["shape"] for i in manifest["graphs"]["extend"]["inputs"][:2]] == [["batch", "seq"], ["batch"]]
    c = fixtures.CONFIG
    cache_shape = {  # prefill writes the whole context's views; decode and extend read `span` positions
        "prefill": ["batch", c.n_head, c.block_size, c.head_dim],
        "decode": ["batch", c.n_head, "span", c.head_dim],
        "decode_one": [1, c.n_head, "span", c.head_dim],
        "extend": ["batch", c.n_head, "span", c.head_dim],
    }
    for graph in ("prefill", "decode", "decode_one", "extend"):
        assert manifest["graphs"][graph]["inputs"][0]["name"] == "idx"
        caches = [f"{kind}_cache.{layer}" for layer in range(c.n_layer) for kind in ("k", "v")]
        inputs = manifest["graphs"][graph]["inputs"][-len(caches) :]
        assert [i["name"] for i in inputs] == caches
        assert all(i["shape"] == cache_shape[graph] for i in inputs), graph
        assert manifest["graphs"][graph]["mutates"] == caches


def wrapper_source(artifacts, kind: str, graph: str) -> str:
    return packages.wrapper_source(artifact_dir(artifacts, kind) / f"{graph}.pt2")


@pytest.mark.parametrize("kind", KINDS)
def test_compiled_graph_calls_the_chosen_attention_kernel(artifacts, kind):
    for graph in ("prefill", "decode", "decode_one", "extend"):
        code = wrapper_source(artifacts, kind, graph)
        assert ("_scaled_dot_product_flash_attention_for_cpu" in code) == (kind == "flash"), graph


@pytest.mark.parametrize("kind", KINDS)
def test_compiled_graphs_write_the_kv_cache_in_place(artifacts, fixtures, kind):
    # A buffer shaped like a layer's cache views (batch, n_head, positions, head_dim)
    # means Inductor copies the cache instead of updating the input: 10x slower
    # decode. Prefill's views hold block_size positions; decode's a symbolic span
    # (its only other dynamic size is the batch), prefill's symbol is the prompt's.
    c = fixtures.CONFIG
    positions = {"prefill": rf"{c.block_size}L", "decode": r"s\d+", "decode_one": r"s\d+"}
    for graph, held in positions.items():
        cache_shaped = re.compile(rf"\b{c.n_head}L, {held}, {c.head_dim}L\}}")
        assert not cache_shaped.search(wrapper_source(artifacts, kind, graph)), f"{kind} {graph} copies the KV cache"


LINEAR_CALLS = {  # the kernel each matrix-product form calls from a compiled graph
    "mm": re.compile(r"aoti_torch_cpu_(?:add)?mm_out\("),
    "onednn": re.compile(r"aoti_torch_cpu__linear_pointwise(?:_binary)?\("),  # _binary: a residual add fused in
    "int8pack": re.compile(r"aoti_torch_cpu__weight_int8pack_mm\("),
    # int4pack: the quantized op that takes the group size as a tensor, through the proxy executor (linear.py)
    "int4pack": re.compile(r"aoti_torch_proxy_executor_call_function\("),
}


@pytest.mark.parametrize(
    ("name", "forms"),
    [
        ("tiny-math", {"prefill": "onednn", "decode": "onednn", "decode_one": "reduction"}),
        ("tiny-other", {"prefill": "mm", "decode": "mm", "decode_one": "mm"}),
        ("tiny-int8", {"prefill": "int8pack", "decode": "int8pack", "decode_one": "reduction"}),
        ("tiny-int8-blocks", {"prefill": "blocked", "decode": "blocked", "decode_one": "blocked"}),
        ("tiny-int4", {"prefill": "int4pack", "decode": "int4pack", "decode_one": "int4pack"}),
    ],
)
def test_each_graph_runs_its_linears_in_the_recorded_form(artifacts, fixtures, name, forms):
    """Every linear (4 per layer and lm_head) of a graph is one call of its form's
    kernel; a reduction-form graph (reduction, blocked) calls none: its linears are generated code."""
    linears = 4 * fixtures.CONFIG.n_layer + 1
    directory = artifacts / name / "cpu"
    manifest = json.loads((directory / "manifest.json").read_text())
    assert {g: manifest["graphs"][g]["linear"]["form"] for g in forms} == forms
    for graph, form in forms.items():
        code = packages.wrapper_source(directory / f"{graph}.pt2")
        calls = {kernel: len(pattern.findall(code)) for kernel, pattern in LINEAR_CALLS.items()}
        assert calls == {kernel: linears if kernel == form else 0 for kernel in LINEAR_CALLS}, graph


@pytest.mark.parametrize("name", ["tiny-math", "tiny-int4"])
def test_packed_form_graphs_name_the_embedding_apart_from_the_packed_lm_head(artifacts, fixtures, name):
    """The runtime binds every linear weight packed where the linears are oneDNN's or
    aten's int4 kernel (tiny-int4: the host's int4 packing): there the embedding reads
    its own constant (the same tensor in the weights file), as stored."""
    from gpt_aot.model.linear import PACKED_FORMS, Linear

    linear_weights = {f"{n}.weight" for n, m in fixtures.tiny_model("math").named_modules() if isinstance(m, Linear)}
    directory = artifacts / name / "cpu"
    manifest = json.loads((directory / "manifest.json").read_text())
    for graph in ("prefill", "decode", "decode_one"):
        loader = torch._inductor.aoti_load_package(str(directory / f"{graph}.pt2"))
        fqns = set(loader.get_constant_fqns())
        linear = manifest["graphs"][graph]["linear"]
        packed = set(linear.get("packed", []))
        assert packed == (linear_weights if linear["form"] in PACKED_FORMS else set()), graph
        assert packed <= fqns, graph
        assert ("transformer.wte.weight" in fqns) == ("lm_head.weight" in packed), graph
        assert "lm_head.weight" in fqns


def test_check_kernel_rejects_a_graph_without_the_expected_kernel(artifacts):
    with pytest.raises(RuntimeError, match="expected attention flash"):
        inductor.check_kernel(artifact_dir(artifacts, "math") / "prefill.pt2", "cpu", "flash")


@pytest.mark.parametrize("kind", KINDS)
def test_compiled_prefill_and_decode_match_eager(loaded, fixtures, kind):
    """Batch 3 and prompt length 7 (neither was an export example): dynamic shapes hold."""
    eager = fixtures.tiny_model(kind)
    graphs = loaded[kind]
    idx = torch.randint(0, fixtures.CONFIG.vocab_size, (3, 7))
    kv_c, kv_e = graphs.new_kv_cache(3), eager.new_kv_cache(3)
    with torch.no_grad():
        torch.testing.assert_close(graphs.prefill(idx, kv_c), eager.prefill(idx, kv_e), atol=TOL, rtol=TOL)
        for t in range(7, 12):
            tok = torch.full((3, 1), t)
            pos = torch.tensor([t, t + 3, t - 5])  # each row at its own position
            torch.testing.assert_close(graphs.decode(tok, pos, kv_c), eager.decode(tok, pos, kv_e), atol=TOL, rtol=TOL)
    torch.testing.assert_close(kv_c, kv_e, atol=TOL, rtol=TOL)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("rows", [1, 3])  # decode_one, the batched decode
def test_compiled_decode_reads_no_cache_position_past_its_span(loaded, fixtures, kind, rows):
    """The cache views end after the furthest row's position (span 10 here, not an export
    example): NaN past them never reaches a logit, and the step writes the cache in place."""
    eager = fixtures.tiny_model(kind)
    graphs = loaded[kind]
    idx = torch.randint(0, fixtures.CONFIG.vocab_size, (rows, 9))
    kv_c, kv_e = graphs.new_kv_cache(rows), eager.new_kv_cache(rows)
    pos = torch.tensor([9, 4, 6][:rows])
    with torch.no_grad():
        graphs.prefill(idx, kv_c)
        eager.prefill(idx, kv_e)
        kv_c[..., 10:, :] = float("nan")
        logits = graphs.decode(idx[:, :1], pos, kv_c)
        expected = eager.decode(idx[:, :1], pos, kv_e)
    assert logits.isfinite().all()
    torch.testing.assert_close(logits, expected, atol=TOL, rtol=TOL)
    torch.testing.assert_close(kv_c[..., :10, :], kv_e[..., :10, :], atol=TOL, rtol=TOL)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("rows", [1, 3])
def test_compiled_extend_matches_eager_and_full_recompute(loaded, fixtures, kind, rows):
    """Rows prefilled to their own lengths, then 5 tokens appended to each at its own position
    (batch, length and span none an export example): the logits equal eager extend's and a full
    recompute's, the cache equals eager's, and NaN past the span never reaches a logit."""
    eager = fixtures.tiny_model(kind)
    graphs = loaded[kind]
    lengths = [3, 9, 6][:rows]
    idx = torch.randint(0, fixtures.CONFIG.vocab_size, (rows, 16))
    kv_c, kv_e = graphs.new_kv_cache(rows), eager.new_kv_cache(rows)
    start, T = torch.tensor(lengths), 5
    new = idx.gather(1, start.view(-1, 1) + torch.arange(T).view(1, -1))
    with torch.no_grad():
        for row, n in enumerate(lengths):
            graphs.prefill(idx[row : row + 1, :n], kv_c[:, :, row : row + 1])
            eager.prefill(idx[row : row + 1, :n], kv_e[:, :, row : row + 1])
        span = max(lengths) + T
        kv_c[..., span:, :] = float("nan")
        logits = graphs.extend(new, start, kv_c)
        torch.testing.assert_close(logits, eager.extend(new, start, kv_e), atol=TOL, rtol=TOL)
        for row, n in enumerate(lengths):
            full, _ = eager(idx[row : row + 1, : n + T])
            torch.testing.assert_close(logits[row], full[0, -1], atol=TOL, rtol=TOL)
    torch.testing.assert_close(kv_c[..., :span, :], kv_e[..., :span, :], atol=TOL, rtol=TOL)


@pytest.mark.parametrize("kind", KINDS)
def test_compiled_decode_steps_equal_full_recompute(loaded, fixtures, kind):
    eager = fixtures.tiny_model(kind)
    graphs = loaded[kind]
    block = fixtures.CONFIG.block_size
    idx = torch.randint(0, fixtures.CONFIG.vocab_size, (1, block))
    kv = graphs.new_kv_cache(1)
    with torch.no_grad():
        logits = graphs.prefill(idx[:, :3], kv)
        for t in range(3, block):
            full, _ = eager(idx[:, :t])
            torch.testing.assert_close(logits, full[:, -1], atol=TOL, rtol=TOL)
            logits = graphs.decode(idx[:, t : t + 1], torch.tensor([t]), kv)


def test_graphs_read_the_bound_weights_not_a_copy(loaded, fixtures):
    """Weights are user-managed constants: an in-place change is seen by both graphs."""
    graphs = ArtifactGraphs(loaded["math"].directory)  # a fresh load: its weights are ours to change
    idx = torch.randint(0, fixtures.CONFIG.vocab_size, (1, 4))
    before = graphs.prefill(idx, graphs.new_kv_cache(1))
    graphs.weights["transformer.ln_f.weight"].mul_(2.0)
    after = graphs.prefill(idx, kv := graphs.new_kv_cache(1))
    after_decode = graphs.decode(idx[:, :1], torch.tensor([4]), kv)
    eager = fixtures.tiny_model("math")
    with torch.no_grad():
        eager.transformer.ln_f.weight.mul_(2.0)
        expected = eager.prefill(idx, kv_e := eager.new_kv_cache(1))
        expected_decode = eager.decode(idx[:, :1], torch.tensor([4]), kv_e)
    assert not torch.allclose(before, after)
    torch.testing.assert_close(after, expected, atol=TOL, rtol=TOL)
    torch.testing.assert_close(after_decode, expected_decode, atol=TOL, rtol=TOL)


def test_failed_compile_leaves_the_previous_artifact_intact(tmp_path, artifacts, fixtures, monkeypatch):
    out = tmp_path / "model" / "cpu"
    target = resolve("cpu", "auto", "fp32")
    shutil.copytree(artifacts / "tiny-math" / "cpu", out)  # the previous artifact: a compiled one, as it ships
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def broken(*args, **kwargs):
        raise RuntimeError("compiler crashed")

    monkeypatch.setattr(torch._inductor, "aoti_compile_and_package", broken)
    with pytest.raises(RuntimeError, match="compiler crashed"):
        pipeline.compile_artifact(
            fixtures.tiny_model("naive"),
            target,
            out,
            "m",
            fixtures.tokenizer(),
            attention="naive",
            decode_linear="reduction",  # named, not measured: the compile gets to its packaging step at once
            batched_linear="mm",
            max_batch=2,
            quiet=True,
        )
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in out.parent.iterdir()) == ["cpu"]  # no temporary left behind


def test_a_block_size_too_small_to_export_is_refused_by_name(fixtures):
    from dataclasses import replace

    from gpt_aot.compiler.graphs import export_graphs
    from gpt_aot.model.gpt import GPT

    kinds = {"prefill": "math", "decode": "math"}
    with pytest.raises(ValueError, match="block_size 2 is too small to compile: it must be at least 3"):
        export_graphs(GPT(replace(fixtures.CONFIG, block_size=2), "math"), kinds)
    assert set(export_graphs(GPT(replace(fixtures.CONFIG, block_size=3), "math"), kinds)) == {"prefill", "decode"}


def test_decode_attention_is_measured_on_the_compiled_decode_graph_against_math(fixtures):
    """Each kind's decode graph as AOTInductor compiles it, at one and eight rows over a short cache (128
    positions) and the whole context (160 here), each setting timed apart; the pick compares the geometric
    mean of each setting's time over math's."""
    from dataclasses import replace

    from gpt_aot.model.gpt import GPT

    model = GPT(replace(fixtures.CONFIG, block_size=160), "flash").init_weights(fixtures.SEED).eval()
    candidates = attention_pick.measure_decode(model, resolve("cpu", "auto", "fp32"), repeats=3)
    assert set(candidates) == {"math", "flash", "efficient", "cudnn", "chunked"}  # naive: a reference only
    assert candidates["math"]["max_abs_err"] == 0.0
    settings = {f"rows {rows}, span {span}" for rows in (1, 8) for span in (128, 160)}
    for kind in ("math", "flash", "chunked"):  # every kind with a CPU kernel for decode's call
        c = candidates[kind]
        assert c["runs"] and c["max_abs_err"] < TOL, kind
        assert set(c["ms_by_setting"]) == settings and all(ms > 0 for ms in c["ms_by_setting"].values())
        assert c["ms"] == pytest.approx(sum(c["ms_by_setting"].values()), abs=1e-3) and c["spread"] >= 0
        ratios = [ms / candidates["math"]["ms_by_setting"][s] for s, ms in c["ms_by_setting"].items()]
        assert c["relative"] == pytest.approx(math.prod(ratios) ** (1 / len(ratios)), rel=1e-3)
    assert candidates["math"]["relative"] == 1.0
    assert not candidates["cudnn"]["runs"]
    assert measure.pick(candidates, torch.float32) == min(
        ("math", "flash", "chunked"), key=lambda k: candidates[k]["relative"]
    )
    assert model.attention == "flash"  # the model is left as it came


def test_a_candidate_with_its_own_tolerance_is_judged_by_it():
    """A linear form that rounds its activations carries a wider tolerance (linear_pick): within it, the fastest
    wins; past it, never, however fast; without one, the dtype's applies."""
    candidates = {
        "mm": {"runs": True, "ms": 3.0, "max_abs_err": 0.0},
        "q8": {"runs": True, "ms": 1.0, "max_abs_err": 0.01, "tolerance": 0.02},
        "kernel": {"runs": True, "ms": 2.0, "max_abs_err": 0.0},
    }
    assert measure.pick(candidates, torch.float32) == "q8"
    candidates["q8"]["max_abs_err"] = 0.03
    assert measure.pick(candidates, torch.float32) == "kernel"
    del candidates["q8"]["tolerance"]
    candidates["q8"]["max_abs_err"] = 0.01
    assert measure.pick(candidates, torch.float32) == "kernel"  # past fp32's 1e-4
    assert measure.pick(candidates, torch.bfloat16) == "q8"  # within bf16's 5e-2


def test_linear_forms_compute_the_same_product(fixtures):
    from gpt_aot.model import kernels
    from gpt_aot.model.linear import LAYOUT_LINEAR_FORMS, LINEAR_FORMS, Linear, packed_linear_weights

    kernels.load()  # the kernel form's operator, which GPT.set_linear_form would register (set directly below)

    # Every form reads some weight layout, and every layout's forms are forms, each named once.
    assert len(set(LINEAR_FORMS)) == len(LINEAR_FORMS)
    assert set(LINEAR_FORMS) == set().union(*LAYOUT_LINEAR_FORMS.values())
    for bias in (True, False):
        linear = Linear(16, 24, bias=bias)
        for shape in ((1, 16), (3, 1, 16), (2, 5, 16)):
            x = torch.randn(shape)
            linear.form = "mm"
            expected = linear(x)
            for form in ("reduction", "onednn", "kernel"):
                linear.form = form
                torch.testing.assert_close(linear(x), expected, atol=1e-6, rtol=1e-6, msg=form)
    model = fixtures.tiny_model("math")
    model.set_linear_form("reduction")
    assert {m.form for m in model.modules() if isinstance(m, Linear)} == {"reduction"}
    # The onednn form on packed weights (as the runtime binds them): the same product.
    x = torch.randint(0, fixtures.CONFIG.vocab_size, (2, 5))
    model.set_linear_form("mm")
    expected, _ = model(x)
    model.set_linear_form("onednn")
    with packed_linear_weights(model):
        assert all(set(m.packed) == {"onednn"} for m in model.modules() if isinstance(m, Linear))  # fp32: no panels
        assert all(m.packed["onednn"].is_mkldnn for m in model.modules() if isinstance(m, Linear))
        packed, _ = model(x)
    assert all(m.packed is None for m in model.modules() if isinstance(m, Linear))
    torch.testing.assert_close(packed, expected, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="not one of"):
        model.set_linear_form("gemv")


def test_decode_linear_form_is_measured_against_mm(fixtures):
    model = fixtures.tiny_model("math")
    # fp32 weights: every float form but panels (bf16 only: tests/aot/test_panels.py).
    for rows, graph in ((1, "decode_one"), (3, "decode")):
        forms = linear_pick.graph_linear_forms(model, graph)
        assert "panels" not in forms and set(forms) < set(linear_pick.BATCHED_LINEAR_FORMS[None]) | {"reduction"}
        candidates = linear_pick.measure_decode_linear(model, forms, rows)
        assert set(candidates) == set(forms)
        assert candidates["mm"]["max_abs_err"] == 0.0
        for form in forms:
            assert candidates[form]["runs"] and candidates[form]["ms"] > 0
            assert candidates[form]["max_abs_err"] < TOL, form
        assert model.linear_form == "mm" and model.attention == "math"  # left as it came
        assert measure.pick(candidates, torch.float32) == min(candidates, key=lambda f: candidates[f]["ms"])
    with pytest.raises(ValueError, match="measure them apart"):
        linear_pick.measure_decode_linear(model, ("mm", "reduction", "onednn"))


def test_decode_linear_forms_are_measured_right_with_the_chunked_attention(fixtures):
    """decode's kernel writes the cache in place; compiled by torch.compile over views of a larger cache it read
    memory never written, every form's logits were NaN and the compile failed with "linear form 'naive'"
    (scripts/demo.sh on a host whose decode pick was chunked)."""
    model = fixtures.tiny_model("chunked")
    forms = linear_pick.graph_linear_forms(model, "decode_one")
    candidates = linear_pick.measure_decode_linear(model, forms, 1)
    assert candidates["mm"]["reference_max_abs"] > 0.0  # finite logits: NaN compares false
    for form in forms:
        assert candidates[form]["max_abs_err"] < TOL, (form, candidates[form])
    fp32 = resolve("cpu", "auto", "fp32")
    pick = linear_pick.choose_linear(model, fp32, "auto", "chunked")
    assert pick["form"] in forms and pick["selected_by"] == "measurement"


def test_a_linear_pick_with_no_correct_form_names_the_errors(fixtures, monkeypatch):
    model = fixtures.tiny_model("math")
    nan = {"runs": True, "ms": 1.0, "max_abs_err": float("nan"), "reference_max_abs": float("nan")}
    monkeypatch.setattr(linear_pick, "measure_decode_linear", lambda model, forms, rows: {f: nan for f in forms})
    message = r"no linear form of decode_one matches mm within tolerance \(math attention\): mm nan"
    with pytest.raises(RuntimeError, match=message):
        linear_pick.choose_linear(model, resolve("cpu", "auto", "fp32"), "auto", "math")


def test_onednn_is_refused_or_skipped_where_it_has_no_kernel(fixtures):
    from gpt_aot.compiler.target import Target
    from gpt_aot.model.linear import linear_form_runs_on

    assert linear_form_runs_on("onednn", torch.device("cpu")) == torch.backends.mkldnn.is_available()
    assert not linear_form_runs_on("onednn", torch.device("cuda"))
    assert linear_form_runs_on("mm", torch.device("cuda")) and linear_form_runs_on("reduction", torch.device("cuda"))
    gpu = Target("cuda", "sm_90", torch.float32, {})
    model = fixtures.tiny_model("math")
    with pytest.raises(ValueError, match="linear form 'onednn' has no kernel on cuda"):
        linear_pick.choose_linear(model, gpu, "onednn", "math", "decode")
    # Nothing to measure (and no GPU needed to decide): mm is the batched graphs' only form there.
    for graph in ("decode", "prefill"):
        assert linear_pick.choose_linear(model, gpu, "auto", "math", graph) == {
            "form": "mm",
            "selected_by": "only form with a kernel",
        }
    pick = linear_pick.choose_linear(model, gpu, "auto", "math", "decode")
    assert pick == {"form": "mm", "selected_by": "only form with a kernel"}
    with pytest.raises(ValueError, match="'reduction' is not one of auto, mm, onednn"):
        linear_pick.choose_linear(model, resolve("cpu", "auto", "fp32"), "reduction", "math", "prefill")
    with pytest.raises(ValueError, match="'int8pack' is not one of auto, mm, reduction"):  # float weights
        linear_pick.choose_linear(model, resolve("cpu", "auto", "fp32"), "int8pack", "math")


def test_prefill_and_decode_each_compile_with_their_own_pick(tmp_path, fixtures, monkeypatch):
    """auto picks a kernel per graph; each package calls its own and the manifest records both."""

    def pick_per_graph(model, target, requested, measure=attention_pick.measure):
        assert requested == "auto"
        kind = "math" if measure is attention_pick.measure_decode else "flash"
        return {"backend": kind, "selected_by": "measurement"}

    monkeypatch.setattr(attention_pick, "choose_attention", pick_per_graph)
    out = tmp_path / "m" / "cpu"
    target = resolve("cpu", "auto", "fp32")
    manifest = pipeline.compile_artifact(
        fixtures.tiny_model("math"), target, out, "m", fixtures.tokenizer(), attention="auto", max_batch=4, quiet=True
    )
    assert manifest["attention"]["backend"] == "flash" and manifest["attention"]["decode"]["backend"] == "math"
    flash_kernel = inductor.KERNEL_SYMBOLS[("cpu", "flash")]
    assert flash_kernel in packages.wrapper_source(out / "prefill.pt2")
    assert flash_kernel not in packages.wrapper_source(out / "decode.pt2")
    graphs, eager = ArtifactGraphs(out), fixtures.tiny_model("math")
    idx = torch.randint(0, fixtures.CONFIG.vocab_size, (2, 6))
    kv_c, kv_e = graphs.new_kv_cache(2), eager.new_kv_cache(2)
    with torch.no_grad():
        torch.testing.assert_close(graphs.prefill(idx, kv_c), eager.prefill(idx, kv_e), atol=TOL, rtol=TOL)
        tok, pos = idx[:, :1], torch.tensor([6, 6])
        torch.testing.assert_close(graphs.decode(tok, pos, kv_c), eager.decode(tok, pos, kv_e), atol=TOL, rtol=TOL)
    for graph, forms, rows in (
        ("decode_one", {"mm", "reduction", "kernel"}, 1),
        ("decode", {"mm", "onednn", "kernel"}, 4),
    ):
        pick = manifest["graphs"][graph]["linear"]
        assert pick["selected_by"] == "measurement" and pick["rows"] == rows and set(pick["candidates"]) == forms
        assert pick["form"] == min(forms, key=lambda f: pick["candidates"][f]["ms"])
    # Prefill's own pick, measured on a prompt (the whole tiny context) rather than on decode steps.
    pick = manifest["graphs"]["prefill"]["linear"]
    assert pick["selected_by"] == "measurement" and pick["tokens"] == fixtures.CONFIG.block_size
    assert set(pick["candidates"]) == {"mm", "onednn", "kernel"}
    assert pick["form"] == min(pick["candidates"], key=lambda f: pick["candidates"][f]["ms"])
    assert flash_kernel not in packages.wrapper_source(out / "decode_one.pt2")  # decode's kernel
    # The golden prefill is the prefill kernel's (flash), not decode's (math): the two differ in the last bits.
    golden = load_file(str(out / "golden.safetensors"))
    with torch.no_grad():
        by_kind = {kind: fixtures.tiny_model(kind).prefill(golden["tokens"], eager.new_kv_cache(1)) for kind in KINDS}
    assert torch.equal(golden["prefill_logits"], by_kind["flash"])
    assert not torch.equal(golden["prefill_logits"], by_kind["math"])


def test_no_cpu_graph_hard_codes_a_thread_count(artifacts):
    # Every graph of every CPU test artifact, training graphs included: the kernels'
    # parallel regions take OpenMP's thread count at run time (the runtime's num_threads).
    pt2_files = sorted(artifacts.glob("tiny-*/cpu/*.pt2"))
    assert {p.stem for p in pt2_files} >= {"prefill", "decode", "decode_one", "train_step", "eval_loss", "adamw"}
    parallel_regions = 0
    for package in pt2_files:
        code = packages.kernel_sources(package)
        assert re.search(r"omp parallel[^\n]*num_threads", code) is None, package
        parallel_regions += code.count("#pragma omp parallel")
    assert parallel_regions > 0  # the check looked at parallel code
