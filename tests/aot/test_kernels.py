"""The kernel library (kernels/) from the compile to the runtime. Its decode attention ("chunked"): a measured
candidate, called by the compiled decode graphs as a C function (kernels/c_shims.h), equal to eager PyTorch, the same
greedy tokens on every vector path the host runs, and refused by a runtime that lacks the version an artifact
names. The kernel against its scalar reference and SDPA on each path: tests/kernels/test_decode_attention.cpp.
Its linear (the "kernel" linear form): torch's linear as an operator, and an artifact whose graphs all call it
(the tiny-naive fixture) equal to eager PyTorch, verified by the runtime, the same greedy tokens on every path.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gpt_aot.artifact.loader import ArtifactGraphs
from gpt_aot.compiler import attention_pick, packages
from gpt_aot.model import attention, kernels

ROOT = Path(__file__).resolve().parents[2]
CLI = Path(os.environ.get("GPT_CLI", ROOT / "build" / "cli" / "gpt"))
TOL = 1e-4  # fp32: the kernel sums in another order than SDPA's math
OPERATOR = "gpt_kernels::decode_attention"
ROWS_OPERATOR = "gpt_kernels::decode_attention_rows"  # the mixed graph's: tokens of any sequences


def long_context(artifacts: Path) -> Path:
    return artifacts / "long-context" / "cpu"


def test_chunked_runs_decodes_call_only(fixtures):
    """A candidate for decode (tests/aot/test_compile.py measures it there), none for a causal prompt."""
    cpu = torch.device("cpu")
    assert attention.attention_runs_on("chunked", cpu, torch.float32, "masked")
    assert not attention.attention_runs_on("chunked", cpu, torch.float32, "causal")
    assert not attention.attention_runs_on("chunked", torch.device("cuda"), torch.float32, "masked")
    assert not attention_pick.measure(fixtures.tiny_model("math"), repeats=1)["chunked"]["runs"]
    assert attention.several_queries_kind("chunked") == "math"  # extend's several queries a row
    assert attention.several_queries_kind("flash") == "flash"


def test_the_decode_graphs_call_the_library_and_the_manifest_names_its_version(artifacts):
    directory = long_context(artifacts)
    manifest = json.loads((directory / "manifest.json").read_text())
    assert manifest["format_version"] == 14
    operators = [OPERATOR, ROWS_OPERATOR]
    assert manifest["kernels"] == {"library": "gpt_kernels", "version": kernels.load(), "operators": operators}
    assert manifest["attention"]["decode"]["backend"] == "chunked"
    calls = {graph: packages.kernel_operators(directory / f"{graph}.pt2") for graph in manifest["graphs"]}
    # Every call a C function's: none through the proxy executor.
    assert all(not packages.extern_operators(directory / f"{graph}.pt2") for graph in manifest["graphs"])
    expected = {
        "prefill": set(),
        "decode": {OPERATOR},
        "decode_one": {OPERATOR},
        "extend": set(),
        "mixed": {ROWS_OPERATOR},
    }
    assert calls == expected
    # An artifact whose graphs call no library operator stays format 13, which older runtimes read.
    assert json.loads((artifacts / "tiny-math" / "cpu" / "manifest.json").read_text())["format_version"] == 13


def test_compiled_chunked_decode_equals_eager_math_for_one_and_several_rows(artifacts, fixtures):
    """Rows at positions in the first, second and fourth chunk of the cache (chunks of 256 positions)."""
    graphs = ArtifactGraphs(long_context(artifacts))
    eager = fixtures.fixture_model("long-context", "math", fixtures.SEED)
    gen = torch.Generator().manual_seed(5)
    for rows, prompt in ((1, 700), (3, 900)):
        idx = torch.randint(0, fixtures.CONFIG.vocab_size, (rows, prompt), generator=gen)
        kv_c, kv_e = graphs.new_kv_cache(rows), eager.new_kv_cache(rows)
        with torch.no_grad():
            torch.testing.assert_close(graphs.prefill(idx, kv_c), eager.prefill(idx, kv_e), atol=TOL, rtol=TOL)
            pos = torch.tensor([prompt, 300, 5][:rows])  # each row's cache is filled up to its position
            for step in range(3):
                tok = torch.randint(0, fixtures.CONFIG.vocab_size, (rows, 1), generator=gen)
                got, expected = graphs.decode(tok, pos + step, kv_c), eager.decode(tok, pos + step, kv_e)
                torch.testing.assert_close(got, expected, atol=TOL, rtol=TOL, msg=f"{rows} rows, step {step}")
        torch.testing.assert_close(kv_c, kv_e, atol=TOL, rtol=TOL)  # the kernel wrote each row's new key and value


def test_compiled_mixed_equals_eager_and_decode_steps(artifacts, fixtures):
    """Three rows prefilled to 700, 300 and 5 tokens (the first, second and third chunk of the cache); one mixed
    call appends a decode step to row 0, a piece of 6 tokens to row 2 and 4 to row 1, the last two drawn: equal to
    eager mixed, and the drawn rows to the decode steps of the same tokens one by one (on a fresh cache)."""
    graphs = ArtifactGraphs(long_context(artifacts))
    eager = fixtures.fixture_model("long-context", "math", fixtures.SEED)
    gen = torch.Generator().manual_seed(9)
    lengths = [700, 300, 5]
    idx = torch.randint(0, fixtures.CONFIG.vocab_size, (3, 720), generator=gen)
    seq = torch.tensor([0] + [2] * 6 + [1] * 4)
    pos = torch.tensor([700, *range(5, 11), *range(300, 304)])
    last = torch.tensor([0, 6, 10])
    caches = {}
    with torch.no_grad():
        for name, model in (("compiled", graphs), ("eager", eager), ("steps", eager)):
            kv = model.new_kv_cache(3)
            for row, n in enumerate(lengths):
                model.prefill(idx[row : row + 1, :n], kv[:, :, row : row + 1])
            caches[name] = kv
        got = graphs.mixed(idx[seq, pos].view(-1, 1), pos, seq, last, caches["compiled"])
        eager.set_attention("chunked")
        expected = eager.mixed(idx[seq, pos].view(-1, 1), pos, seq, last, caches["eager"])
        torch.testing.assert_close(got, expected, atol=TOL, rtol=TOL)
        torch.testing.assert_close(caches["compiled"], caches["eager"], atol=TOL, rtol=TOL)
        for drawn, token in enumerate(last.tolist()):  # one decode step per token, in order, up to each drawn one
            done = last[drawn - 1] + 1 if drawn else 0
            for t in range(int(done), token + 1):
                row = int(seq[t])
                kv_row = caches["steps"][:, :, row : row + 1]
                step = eager.decode(idx[row, pos[t]].view(1, 1), pos[t : t + 1], kv_row)
            torch.testing.assert_close(got[drawn], step[0], atol=TOL, rtol=TOL)


def vector_paths_here() -> list[str]:
    """The kernels' paths (kernels/cpu/isa.h) this CPU runs, as its kernel reports its features."""
    flags = set(Path("/proc/cpuinfo").read_text().split())
    paths = ["scalar", "avx2"]
    if {"avx512f", "avx512bw"} <= flags:
        paths.append("avx512")
        if {"avx512vl", "avx512_vnni"} <= flags:
            paths.append("avx512_vnni")
            if "avx512_bf16" in flags:
                paths.append("avx512_bf16")
    return paths


def generate(directory: Path, isa: str | None, prompt: str, tokens: int = 24, sampling: tuple = ("--temperature", "0")):
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    env.pop("GPT_KERNELS_ISA", None)
    if isa:
        env["GPT_KERNELS_ISA"] = isa
    command = [str(CLI), "generate", str(directory), "-p", prompt, "-n", str(tokens), "--ignore-eos", *sampling]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)


def eager_greedy(fixtures, prompt: str, tokens: int) -> str:
    model = fixtures.fixture_model("long-context", "math", fixtures.SEED)
    ids = [fixtures.VOCAB.index(c) for c in prompt]
    with torch.no_grad():
        kv = model.new_kv_cache(1)
        logits = model.prefill(torch.tensor([ids]), kv)
        out = []
        for i in range(tokens):
            token = int(logits[0, : fixtures.CONFIG.vocab_size].argmax())
            out.append(fixtures.VOCAB[token])
            logits = model.decode(torch.tensor([[token]]), torch.tensor([len(ids) + i]), kv)
    return "".join(out)


@pytest.mark.skipif(not CLI.exists(), reason=f"gpt CLI not built at {CLI}")
def test_the_runtime_gives_eagers_greedy_tokens_on_every_vector_path_this_cpu_runs(artifacts, fixtures):
    """A prompt of 300 characters: the decode steps span two chunks. Greedy tokens are eager PyTorch's; sampled
    ones (seed 7, temperature 1: varied text, which a constant greedy run may not be) are the same on every path.
    Each path is forced through GPT_KERNELS_ISA (kernels/README.md); AVX-512's where the CPU has them."""
    prompt = ("The quick brown fox jumps over the lazy dog. " * 7)[:300]
    expected = eager_greedy(fixtures, prompt, 24)
    sampled = {}
    for isa in [None, *vector_paths_here()]:
        done = generate(long_context(artifacts), isa, prompt)
        assert done.returncode == 0, (isa, done.stderr[-2000:])
        assert done.stdout.rstrip("\n").endswith(expected), (isa, done.stdout)
        done = generate(long_context(artifacts), isa, prompt, sampling=("--temperature", "1", "--seed", "7"))
        assert done.returncode == 0, (isa, done.stderr[-2000:])
        sampled[isa] = done.stdout.rstrip("\n")[len(prompt) :]
    assert len(set(sampled[None])) > 5, sampled[None]  # varied enough to tell the paths apart
    assert all(text == sampled[None] for text in sampled.values()), sampled


@pytest.mark.skipif(not CLI.exists(), reason=f"gpt CLI not built at {CLI}")
def test_a_path_that_is_not_one_is_reported_not_run(artifacts):
    done = generate(long_context(artifacts), "avx3", "Hello", tokens=2)
    assert done.returncode != 0
    assert "GPT_KERNELS_ISA=avx3 names no path: use scalar, avx2, avx512, avx512_vnni or avx512_bf16" in done.stderr


@pytest.mark.skipif(not CLI.exists(), reason=f"gpt CLI not built at {CLI}")
@pytest.mark.parametrize(
    "kernels_section, message",
    [
        ({"version": 999}, "call kernel library version 999, this runtime has version"),
        ({"operators": ["gpt_kernels::flash_decode"]}, "call gpt_kernels::flash_decode, which this runtime's"),
        ({"library": "other"}, "'kernels.library' must be 'gpt_kernels'"),
    ],
)
def test_an_artifact_naming_kernels_the_runtime_lacks_is_refused_before_its_graphs_load(
    artifacts, tmp_path, kernels_section, message
):
    directory = tmp_path / "cpu"
    shutil.copytree(long_context(artifacts), directory)
    manifest = json.loads((directory / "manifest.json").read_text())
    manifest["kernels"].update(kernels_section)
    (directory / "manifest.json").write_text(json.dumps(manifest))
    done = subprocess.run([str(CLI), "verify", str(directory)], capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert message in done.stderr, done.stderr
    status = "GPT_ERR_ARTIFACT_INVALID" if "library" in kernels_section else "GPT_ERR_ARTIFACT_VERSION"
    assert status in done.stderr, done.stderr


# ---- the linear (kernels/cpu/linear.h; each vector path against torch in float64: tests/kernels/test_linear.cpp)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_linear_operator_is_torchs_linear(dtype):
    kernels.load()
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(2, 5, 96, generator=gen).to(dtype)
    weight, bias = torch.randn(70, 96, generator=gen).to(dtype), torch.randn(70, generator=gen).to(dtype)
    got = torch.ops.gpt_kernels.linear(x, weight, bias)
    expected = torch.nn.functional.linear(x.double(), weight.double(), bias.double())
    assert got.dtype == dtype and got.shape == (2, 5, 70)
    tol = 1e-5 if dtype == torch.float32 else 2e-2  # fp32 sums; bf16's 8-bit mantissa on the result
    torch.testing.assert_close(got.double(), expected, atol=tol, rtol=tol)


def test_an_artifact_with_the_kernel_linear_calls_it_in_every_graph_and_equals_eager(artifacts, fixtures):
    """tiny-naive (tests/fixtures/build_artifacts.py) pins the kernel library's linear for every graph: each calls
    the operator, the manifest names it under the unchanged library version, and a batch of rows at their own
    positions gives eager PyTorch's logits (test_compile.py runs its extend, spans and recompute checks too)."""
    out = artifacts / "tiny-naive" / "cpu"
    manifest = json.loads((out / "manifest.json").read_text())
    linear = "gpt_kernels::linear"
    assert manifest["kernels"] == {"library": "gpt_kernels", "version": kernels.load(), "operators": [linear]}
    assert {graph: manifest["graphs"][graph]["linear"]["form"] for graph in manifest["graphs"]} == dict.fromkeys(
        ("prefill", "decode", "decode_one", "extend"), "kernel"
    )
    calls = {graph: packages.kernel_operators(out / f"{graph}.pt2") for graph in manifest["graphs"]}
    assert calls == dict.fromkeys(manifest["graphs"], {linear})
    assert all(not packages.extern_operators(out / f"{graph}.pt2") for graph in manifest["graphs"])
    graphs, eager = ArtifactGraphs(out), fixtures.tiny_model("naive")
    idx = torch.randint(0, fixtures.CONFIG.vocab_size, (3, 7), generator=torch.Generator().manual_seed(4))
    kv_c, kv_e = graphs.new_kv_cache(3), eager.new_kv_cache(3)
    with torch.no_grad():
        torch.testing.assert_close(graphs.prefill(idx, kv_c), eager.prefill(idx, kv_e), atol=TOL, rtol=TOL)
        tok, pos = idx[:, :1], torch.tensor([7, 9, 3])
        torch.testing.assert_close(graphs.decode(tok, pos, kv_c), eager.decode(tok, pos, kv_e), atol=TOL, rtol=TOL)


@pytest.mark.skipif(not CLI.exists(), reason=f"gpt CLI not built at {CLI}")
def test_the_kernel_linears_artifact_verifies_and_gives_eagers_greedy_tokens_on_every_path(artifacts, fixtures):
    """The runtime loads it, passes its golden check, and gives eager PyTorch's greedy tokens with the dispatch on
    the widest path and forced to each lower one (GPT_KERNELS_ISA)."""
    out = artifacts / "tiny-naive" / "cpu"
    done = subprocess.run([str(CLI), "verify", str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    prompt, tokens = "Hello", 20
    model, ids = fixtures.tiny_model("naive"), [fixtures.VOCAB.index(c) for c in prompt]
    with torch.no_grad():
        full = torch.tensor([ids])
        for _ in range(tokens):  # full recompute each step, the prompt within the tiny context
            logits, _ = model(full)
            full = torch.cat([full, logits[:, -1, : fixtures.CONFIG.vocab_size].argmax(-1, keepdim=True)], 1)
    expected = "".join(fixtures.VOCAB[int(t)] for t in full[0, len(ids) :])
    for isa in [None, *vector_paths_here()]:
        done = generate(out, isa, prompt, tokens)
        assert done.returncode == 0, (isa, done.stderr[-2000:])
        assert done.stdout.rstrip("\n").endswith(expected), (isa, done.stdout, expected)


@pytest.mark.skipif(not CLI.exists(), reason=f"gpt CLI not built at {CLI}")
@pytest.mark.parametrize("name", ["tiny-bf16-panels", "tiny-int8-q8", "tiny-int4-kernel", "tiny-kv-int8"])
def test_the_panels_artifacts_verify_and_give_one_greedy_text_on_every_path(artifacts, name):
    """tiny-bf16-panels (bf16 activations: on avx512_bf16 the panel tile multiplies with `vdpbf16ps`, on the others
    with FMAs, summing in another order), tiny-int8-q8 (its batched graphs on q8 panels: with VNNI `vpdpbusd` on
    the weights plus 128, on the others `vpmaddubsw` on the weights given the inputs' signs) and tiny-int4-kernel (on
    u4 panels: `vpdpbusd`, or `vpmaddubsw` and `vpmaddwd`) and tiny-kv-int8 (tiny-bf16-panels' linears over an int8
    KV cache, each path's attention widening its bytes): the golden check passes
    and the greedy and sampled text are the same with the dispatch on the widest path and forced to each lower one."""
    out = artifacts / name / "cpu"
    texts = {}
    for isa in [None, *vector_paths_here()]:
        env = {**os.environ, "OMP_NUM_THREADS": "2"}
        env.pop("GPT_KERNELS_ISA", None)
        if isa:
            env["GPT_KERNELS_ISA"] = isa
        done = subprocess.run([str(CLI), "verify", str(out)], capture_output=True, text=True, env=env, timeout=300)
        assert done.returncode == 0, (isa, done.stderr[-2000:])
        greedy = generate(out, isa, "Hello", 24)
        sampled = generate(out, isa, "Hello", 24, sampling=("--temperature", "1", "--seed", "7"))
        assert greedy.returncode == 0 and sampled.returncode == 0, (isa, greedy.stderr[-2000:], sampled.stderr[-2000:])
        texts[isa] = (greedy.stdout, sampled.stdout)
    assert len(set(texts[None][1])) > 5, texts[None]
    assert all(text == texts[None] for text in texts.values()), texts


def defined_symbols(library: Path) -> set[str]:
    exported = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True)
    assert exported.returncode == 0, exported.stderr
    return {line.split()[-1] for line in exported.stdout.splitlines() if line.strip()}


def test_every_operator_a_graph_calls_has_its_c_shim_and_no_torch_function_shares_its_name():
    """kernels/c_shims.h declares a C function for each operator of registration.cpp but the packing ones (called by
    the runtime at load) and the library's queries; libgpt_kernel_shims exports each and libgpt_runtime none
    (runtime/abi/exports.map), and torch's own libraries define none of the names: a graph binds its calls in the
    process's global scope, where the first definition would win."""
    registered = set(re.findall(r'm\.def\(\s*"(\w+)\(', (kernels.SOURCE / "registration.cpp").read_text()))
    queries = ("version", "threaded", "active_path", "use_path")  # the library's own, for the compile
    called_by_graphs = {op for op in registered if not op.startswith("pack_") and op not in queries}
    assert set(kernels.c_shim_declarations()) == called_by_graphs
    names = {f"aoti_torch_cpu_{op}" for op in called_by_graphs}
    torch_lib = Path(torch.__file__).parent / "lib"
    for library in sorted(torch_lib.glob("libtorch*.so")):
        assert not names & defined_symbols(library), library
    built = ROOT / "build" / "kernels" / f"libgpt_kernel_shims.so.{kernels.load()}"
    if built.exists():
        assert defined_symbols(built) == names | {"gpt_kernel_shims_install"}
        runtime = ROOT / "build" / "runtime" / "libgpt_runtime.so"
        assert not {name for name in defined_symbols(runtime) if not name.startswith("gpt_")}, "beyond the C API"


# A compiled graph binds its calls of the C shims in the global scope; whatever else is there, every library loaded
# later binds to as well. libtorch_cpu defines these (its MKL and oneDNN among them): a CTranslate2 loaded after
# them ran its GEMMs on torch's MKL and gave wrong tokens.
LIBTORCH_SYMBOLS = ("aoti_torch_get_data_ptr", "sgemm_", "cblas_daxpy")


def test_loading_the_kernel_library_puts_its_c_functions_in_the_global_scope_and_nothing_of_torchs():
    torch_cpu = Path(torch.__file__).parent / "lib" / "libtorch_cpu.so"
    assert set(LIBTORCH_SYMBOLS) <= defined_symbols(torch_cpu)
    # A process of its own: the global scope as a fresh one that imports gpt_aot has it (dlopen(NULL) looks there).
    names = (*LIBTORCH_SYMBOLS, "aoti_torch_cpu_linear")
    probe = (
        "import ctypes, json, gpt_aot\n"
        "from gpt_aot.model import kernels\n"
        "kernels.load()\n"
        "scope = ctypes.CDLL(None)\n"
        f"print(json.dumps({{name: hasattr(scope, name) for name in {names}}}))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "aot")}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    in_scope = json.loads(done.stdout.strip().splitlines()[-1])
    assert in_scope.pop("aoti_torch_cpu_linear"), "the graphs' C functions are not global"
    assert not any(in_scope.values()), in_scope
