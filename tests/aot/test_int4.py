"""Weight-only int4 (quantize.quantize_int4): the scheme, the stored packing and
the host's copy of it for aten's CPU kernel, each int4 linear form against the
eager reference (quantize → dequantize → the same model in PyTorch), the
compiled int4 graphs against it under each ATen CPU capability, and what an int4
artifact records."""

import dataclasses
import functools
import json
import os
import subprocess
import sys
from pathlib import Path

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
from safetensors.torch import load_file

from gpt_aot.artifact.loader import ArtifactGraphs
from gpt_aot.compiler import linear_pick, pipeline
from gpt_aot.compiler.target import resolve
from gpt_aot.compiler.training import OptimizerConfig
from gpt_aot.model.gpt import GPT, GPTConfig
from gpt_aot.model.linear import (
    Linear,
    dequantize_int4,
    from_int4_blocks,
    from_int4_pair_blocks,
    host_reads_int4_blocks64,
    linear_form_runs_on,
    pack_for_int4pack,
    to_int4_blocks,
    to_int4_pair_blocks,
)
from gpt_aot.model.quantize import dequantized, quantize_groups, quantize_int4, quantize_int8, weight_bytes

# The kernel library's int4 linear on the stored blocks and on u4 panels: the forms that round the activations.
ROUNDED_FORMS = ("kernel", "int4panels")
ROOT = Path(__file__).resolve().parents[2]
CLI = Path(os.environ.get("GPT_CLI", ROOT / "build" / "cli" / "gpt"))
# ATen's x86 CPU capabilities, each running the kernels of the one before too. ATEN_CPU_CAPABILITY picks one
# at the first dispatch, without asking the CPU: a process may run only those up to the host's own.
CAPABILITIES = ("default", "avx2", "avx512")

# Rows that are no multiple of 64 (64 wide: c_attn 192 rows, lm_head 128; n_embd 64 so that groups of 64
# fit), and the tiny model's (32 wide: c_attn 96 rows): the last block is padded.
ODD_CONFIG = GPTConfig(block_size=16, vocab_size=70, n_layer=2, n_head=2, n_embd=64, bias=True)


def quantized_tiny(fixtures, dtype=torch.float32, group_size=32) -> GPT:
    return quantize_int4(fixtures.tiny_model("math"), dtype, group_size).to(dtype=dtype)


def test_the_stored_packing_reverses_and_the_hosts_copy_is_atens_packing_of_the_same_values():
    """blocks64 round-trips; pack_for_int4pack gives what aten packs from the int values on this host (its
    kernel reads that, whatever its ATen CPU capability), padding rows included; the stored bytes are read
    as they are only where aten's packing is blocks64 itself (AVX-512: test below)."""
    gen = torch.Generator().manual_seed(0)
    for rows, cols in ((64, 32), (128, 96), (3072, 64)):
        q = torch.randint(0, 16, (rows, cols), generator=gen, dtype=torch.int32)
        packed = to_int4_blocks(q)
        assert packed.dtype == torch.uint8 and packed.shape == (rows, cols // 2)
        assert torch.equal(from_int4_blocks(packed, rows), q.to(torch.uint8))
        atens = torch._convert_weight_to_int4pack_for_cpu(q, 1)
        assert torch.equal(pack_for_int4pack(packed), atens)
        assert host_reads_int4_blocks64() == torch.equal(packed, atens)
    q = torch.randint(0, 16, (70, 32), generator=gen, dtype=torch.int32)
    packed = to_int4_blocks(q)  # padded to 128 rows with zeros
    assert packed.shape == (128, 16) and torch.equal(from_int4_blocks(packed, 128)[70:], torch.zeros(58, 32).byte())
    assert torch.equal(from_int4_blocks(packed, 70), q.to(torch.uint8))
    padded = torch.cat([q, torch.zeros(58, 32, dtype=torch.int32)])
    assert torch.equal(pack_for_int4pack(packed), torch._convert_weight_to_int4pack_for_cpu(padded, 1))


def test_groups_are_quantized_within_half_a_step_and_constant_groups_exactly():
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(5, 64, generator=gen) * torch.tensor([1e-3, 0.02, 1.0, 30.0, 0.5]).unsqueeze(1)
    w[4, 32:] = 0.25  # one constant group
    for dtype in (torch.float32, torch.bfloat16):
        q, scale_zero = quantize_groups(w, 32, dtype)
        assert q.dtype == torch.uint8 and int(q.max()) <= 15 and scale_zero.shape == (2, 5, 2)
        assert scale_zero.dtype == dtype
        scale = scale_zero[..., 0].float().t().repeat_interleave(32, 1)
        zero = scale_zero[..., 1].float().t().repeat_interleave(32, 1)
        restored = (q.float() - 8) * scale + zero
        # the rounding of the stored scale and zero moves the grid by at most a step's rounding error
        slack = 1e-6 if dtype == torch.float32 else 2**-7 * 9
        assert ((restored - w).abs() <= scale / 2 + slack * (w.abs() + scale)).all(), dtype
        assert torch.equal(restored[4, 32:], torch.full((32,), 0.25))
        # each non-constant group reaches both ends of the 16 levels
        groups = q.view(5, 2, 32)
        assert (groups[:4].amin(2) <= 1).all() and (groups[:4].amax(2) >= 14).all()
    with pytest.raises(ValueError, match="whole number of groups"):
        quantize_groups(torch.randn(4, 48), 32, torch.float32)


def test_the_pairs_are_stored_block_by_block_as_the_kernel_reads_them():
    """Each linear's (scale, zero) pairs: block b's 64 rows' pairs in one run, group by group (what the kernel reads
    beside block b's bytes), the same values quantize_groups gives by group."""
    model = GPT(ODD_CONFIG, "math").init_weights(5)
    head = model.lm_head  # 128 rows (the vocabulary padded: 2 blocks) of 64 inputs (2 groups)
    _, by_group = quantize_groups(head.weight, 32, torch.float32)  # (2 groups, 128 rows, 2)
    quantize_int4(model, torch.float32, 32)
    stored = head.weight_scale_zero
    assert stored.shape == (2, 2, 64, 2) and stored.is_contiguous()
    for block in range(2):
        for group in range(2):
            assert torch.equal(stored[block, group], by_group[group, 64 * block : 64 * block + 64])
    assert torch.equal(from_int4_pair_blocks(stored), by_group)
    assert torch.equal(to_int4_pair_blocks(from_int4_pair_blocks(stored)), stored)


def test_quantizing_keeps_names_and_ties_and_takes_under_a_third_of_gpt2_124m_bf16s_bytes():
    config = GPTConfig(vocab_size=50257)  # GPT-2 124M
    model = GPT(config).init_weights(1337)
    bf16_bytes = weight_bytes(model, torch.bfloat16)
    names = set(model.state_dict())
    quantize_int4(model, torch.bfloat16, 32)
    model = model.to(dtype=torch.bfloat16)
    linears = {f"{n}.weight" for n, m in model.named_modules() if isinstance(m, Linear)}
    state = model.state_dict()
    assert set(state) == names | {f"{n}_scale_zero" for n in linears} | {f"{n}_group_size" for n in linears}
    assert all(state[n].dtype == torch.uint8 and state[f"{n}_scale_zero"].dtype == torch.bfloat16 for n in linears)
    assert all(int(state[f"{n}_group_size"]) == 32 for n in linears)
    assert model.transformer.wte.weight is model.lm_head.weight and model.weight_layout == "blocks64"
    assert model.linear_forms == ("mm", "int4pack", "kernel", "int4panels") and model.int8_layout is None
    int4_bytes = weight_bytes(model, torch.bfloat16)
    # int4 is 1/4 of bf16's bytes plus a bf16 scale and zero per 32 weights (1/16 of bf16's): 0.3125 of the
    # linears' bytes; the layer norms, biases and the position table stay bf16 (measured: 0.3175).
    assert 0.3125 <= int4_bytes / bf16_bytes <= 0.32, (int4_bytes, bf16_bytes)
    with pytest.raises(ValueError, match="already quantized"):
        quantize_int4(model, torch.bfloat16)
    with pytest.raises(ValueError, match="group size 48"):
        quantize_int4(GPT(ODD_CONFIG), torch.float32, 48)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("form", ["mm", "int4pack", "kernel", "int4panels"])
@pytest.mark.parametrize("config", ["tiny", "odd"])
def test_each_int4_form_equals_the_dequantized_model(fixtures, dtype, form, config):
    """Prefill of 3 rows, then decode steps of 3 rows at their own positions and of 1 row; the odd
    model's rows fill no whole number of blocks (and groups of 64). The kernel library's int4 linear (kernel, and
    int4panels on the blocks packed in u4 panels) rounds the activations to int8 blocks: within
    ROUNDED_ACTIVATIONS_FRACTION of the logits."""
    if config == "tiny":
        model = quantized_tiny(fixtures, dtype)
    else:
        model = quantize_int4(GPT(ODD_CONFIG, "math").init_weights(3).eval(), dtype, 64).to(dtype=dtype)
    reference = dequantized(model)
    assert all(p.dtype == dtype for p in reference.parameters())
    model.set_linear_form(form)
    rounded = form in ROUNDED_FORMS
    assert_eager_model_matches(model, reference, dtype, ROUNDED_ACTIVATIONS_FRACTION if rounded else None)


def test_the_reference_is_the_int4_weights_not_the_float_or_int8_ones(fixtures):
    model = quantized_tiny(fixtures)
    lm_head = model.lm_head
    weight = dequantize_int4(lm_head.weight, lm_head.weight_scale_zero, lm_head.out_features, torch.float32)
    assert torch.equal(dequantized(model).lm_head.weight, weight)
    idx = torch.randint(0, fixtures.CONFIG.vocab_size, (2, 9))
    with torch.no_grad():
        float_logits, _ = fixtures.tiny_model("math")(idx)
        int8_logits, _ = dequantized(quantize_int8(fixtures.tiny_model("math"), torch.float32))(idx)
        int4_logits, _ = dequantized(model)(idx)
    # int4 is coarser than int8: further from the float model, and not int8's model either
    assert (float_logits - int4_logits).abs().max() > 2 * (float_logits - int8_logits).abs().max()


def test_int4_forms_are_measured_on_the_cpu_only(fixtures):
    model = quantized_tiny(fixtures)
    assert linear_pick.graph_linear_forms(model, "decode_one") == ("mm", "int4pack", *ROUNDED_FORMS)
    assert linear_pick.graph_linear_forms(model, "decode") == ("mm", "int4pack", *ROUNDED_FORMS)
    assert linear_form_runs_on("int4pack", torch.device("cpu"), torch.uint8)
    assert not linear_form_runs_on("int4pack", torch.device("cuda"), torch.uint8)  # another packing there
    assert not linear_form_runs_on("int4pack", torch.device("cpu"), torch.int8)
    cpu = resolve("cpu", "auto", "fp32")
    for graph in ("decode_one", "decode", "prefill"):
        pick = linear_pick.choose_linear(model, cpu, "auto", "math", graph)
        assert set(pick["candidates"]) == {"mm", "int4pack", *ROUNDED_FORMS}, graph
        # The kernel's rounded activations are past an fp32 artifact's tolerance and within their own.
        assert_exact_but_rounded(pick, ROUNDED_FORMS, graph)
    with pytest.raises(ValueError, match="not one of"):
        linear_pick.choose_linear(model, cpu, "blocked", "math", "decode")


def test_compiled_int4_graphs_equal_the_eager_int4_reference(artifacts, fixtures):
    """tiny-int4's prefill, batched decode and decode_one (all int4pack), at batch 3 and 1, prompt
    length 7 and rows at their own positions (none an export example)."""
    graphs = ArtifactGraphs(artifacts / "tiny-int4" / "cpu")
    assert_compiled_graphs_match(graphs, dequantized(quantized_tiny(fixtures)), fixtures.CONFIG.vocab_size)


def test_compiled_int4_kernel_graphs_equal_the_eager_kernel_and_the_golden_allows_its_rounding(artifacts, fixtures):
    """tiny-int4-kernel's graphs (all the kernel library's int4 linear: decode_one's on the blocks as stored, the
    batched graphs' on copies in u4 panels, every linear's listed packed) equal the eager model in the same forms
    within FP32_TOL (the same integer products: only the order of sums moves); its golden vector is the dequantised
    model's, with an atol widened to cover the kernel's rounded activations (golden.golden_tolerance)."""
    directory = artifacts / "tiny-int4-kernel" / "cpu"
    manifest = json.loads((directory / "manifest.json").read_text())
    forms = {g: manifest["graphs"][g]["linear"] for g in ("prefill", "decode", "decode_one")}
    assert {g: linear["form"] for g, linear in forms.items()} == {
        "prefill": "int4panels",
        "decode": "int4panels",
        "decode_one": "kernel",
    }
    model = quantized_tiny(fixtures)
    linears = {f"{name}.weight" for name, m in model.named_modules() if isinstance(m, Linear)}
    assert set(forms["prefill"]["packed"]) == set(forms["decode"]["packed"]) == linears
    assert manifest["kernels"]["operators"] == ["gpt_kernels::linear_int4", "gpt_kernels::linear_int4_panels"]
    model.set_linear_form("int4panels")  # decode_one's kernel reads the same integers as the panels
    assert_compiled_graphs_match(ArtifactGraphs(directory), model, fixtures.CONFIG.vocab_size)
    plain = json.loads((artifacts / "tiny-int4" / "cpu" / "manifest.json").read_text())
    assert plain["golden"]["atol"] == FP32_TOL < manifest["golden"]["atol"] < 5e-2


# Run with ATEN_CPU_CAPABILITY set (argv: capability, tiny-int4's directory, "run" or "pack"). The packing
# checks hold at any capability (aten's packer is plain C++, which runs where the capability's kernels would
# not), the int4 kernel's only where the host runs the capability's kernels.
UNDER_CAPABILITY = """
import sys

import gpt_aot
import torch
import build_artifacts as fixtures
from quantized_checks import assert_compiled_graphs_match, assert_eager_model_matches
from gpt_aot.artifact.loader import ArtifactGraphs
from gpt_aot.model.linear import host_reads_int4_blocks64, pack_for_int4pack, to_int4_blocks
from gpt_aot.model.quantize import dequantized, quantize_int4

capability, directory, run = sys.argv[1], sys.argv[2], sys.argv[3] == "run"
assert torch.backends.cpu.get_cpu_capability() == capability.upper(), torch.backends.cpu.get_cpu_capability()
q = torch.randint(0, 16, (192, 64), generator=torch.Generator().manual_seed(0), dtype=torch.int32)
assert torch.equal(pack_for_int4pack(to_int4_blocks(q)), torch._convert_weight_to_int4pack_for_cpu(q, 1))
# The stored layout is AVX-512's packing (artifacts compiled before the copy was packed read it as stored).
assert host_reads_int4_blocks64() == (capability == "avx512")
if run:
    model = quantize_int4(fixtures.tiny_model("math"), torch.float32, 32)
    reference = dequantized(model)
    model.set_linear_form("int4pack")
    assert_eager_model_matches(model, reference, torch.float32)
    assert_compiled_graphs_match(ArtifactGraphs(directory), reference, fixtures.CONFIG.vocab_size)
"""


@functools.cache
def host_capability() -> str:
    """The ATen CPU capability this host's processes get unless told otherwise."""
    env = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}
    probe = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().lower()


def under_capability(capability: str) -> dict:
    if host_capability() not in CAPABILITIES:
        pytest.skip(f"ATen CPU capability {host_capability()} is no x86 one")
    paths = [str(ROOT / "aot"), str(ROOT / "tests" / "fixtures"), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "ATEN_CPU_CAPABILITY": capability, "PYTHONPATH": os.pathsep.join(filter(None, paths))}


def host_runs(capability: str) -> bool:
    return CAPABILITIES.index(capability) <= CAPABILITIES.index(host_capability())


@pytest.mark.parametrize("capability", CAPABILITIES)
def test_an_int4_artifact_gives_the_eager_logits_under_each_aten_cpu_capability(artifacts, capability):
    """Each capability's int4 kernel reads its own packing (AVX-512 blocks of 64 rows, AVX2 of 32, default
    another): the host's copy is aten's packing under each, and where the host runs that capability the
    eager int4pack model and tiny-int4's compiled graphs (Python loader) give the dequantised model's logits."""
    env = under_capability(capability)
    mode = "run" if host_runs(capability) else "pack"
    directory = artifacts / "tiny-int4" / "cpu"
    command = [sys.executable, "-c", UNDER_CAPABILITY, capability, str(directory), mode]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]


@pytest.mark.skipif(not CLI.exists(), reason=f"gpt CLI not built at {CLI}")
@pytest.mark.parametrize("capability", CAPABILITIES)
def test_the_runtime_verifies_an_int4_artifact_under_each_aten_cpu_capability(artifacts, capability):
    """The C++ runtime packs its copy at load under the capability it runs: the golden vector matches."""
    env = under_capability(capability)
    if not host_runs(capability):
        pytest.skip(f"this host runs ATen CPU capabilities up to {host_capability()}")
    done = subprocess.run(
        [str(CLI), "verify", str(artifacts / "tiny-int4" / "cpu")], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr


def test_an_int4_artifact_records_its_quantization_and_stores_int4_weights(artifacts, fixtures):
    directory = artifacts / "tiny-int4" / "cpu"
    # int4 came with 12; 15 stores the pairs block by block, and the runtime reads no int4 artifact before it
    assert json.loads((directory / "manifest.json").read_text())["format_version"] == 15
    record = assert_artifact_stores(directory, quantized_tiny(fixtures), fixtures.tiny_model("math"))
    assert record["scheme"] == "int4" and record["group_size"] == 32 and record["layout"] == "blocks64"
    stored = load_file(str(directory / "weights.safetensors"))
    assert stored["transformer.h.0.attn.c_attn.weight"].shape == (128, 16)  # 96 rows padded to 128, 32 inputs
    assert stored["transformer.h.0.attn.c_attn.weight_scale_zero"].shape == (2, 1, 64, 2)  # 2 blocks, 1 group


@pytest.mark.parametrize(
    "device,train,message",
    [("cpu", True, "inference only"), ("cuda", False, "CUDA's reads another packing")],
)
def test_int4_is_refused_for_training_and_for_cuda(tmp_path, fixtures, device, train, message):
    target = resolve("cpu", "auto", "fp32")
    if device == "cuda":
        target = dataclasses.replace(target, device="cuda")
    with pytest.raises(ValueError, match=message):
        pipeline.compile_artifact(
            fixtures.tiny_model("math"),
            target,
            tmp_path / "cpu",
            name="t",
            tokenizer=fixtures.tokenizer(),
            train=OptimizerConfig() if train else None,
            quantize="int4",
        )
    assert not (tmp_path / "cpu").exists()
