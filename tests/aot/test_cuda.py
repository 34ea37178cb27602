"""CUDA artifacts against eager PyTorch on the same GPU: every attention kernel the
GPU has, inference in fp32 and bf16, training in fp32, and the runtime's own
generation and arch check. Skipped without a GPU; scripts/gpu_check.sh runs them
on a GPU machine."""

import json
import os
import re
import shutil
import socket
import subprocess
from pathlib import Path

import pytest
import torch

from gpt_aot.artifact.loader import ArtifactGraphs
from gpt_aot.compiler import training
from gpt_aot.compiler.pipeline import compile_artifact
from gpt_aot.compiler.target import resolve
from gpt_aot.model.attention import attention_runs_on
from gpt_aot.model.quantize import dequantized, quantize_int8

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA GPU here (scripts/gpu_check.sh runs these on a GPU machine)"
)

ROOT = Path(__file__).resolve().parents[2]
CLI = Path(os.environ.get("GPT_CLI", ROOT / "build" / "cli" / "gpt"))
# Flash and cuDNN attention have no fp32 kernels; math and efficient run both.
CASES = [("math", "fp32"), ("efficient", "fp32"), ("math", "bf16"), ("flash", "bf16"), ("cudnn", "bf16")]
# fp32 without TF32: only the order of reductions differs. bf16: 8 mantissa bits
# through a few layers, as measure.py's tolerance.
TOL = {torch.float32: 1e-4, torch.bfloat16: 5e-2}


def eager_on_gpu(fixtures, attention: str, dtype: torch.dtype):
    return fixtures.tiny_model(attention).to("cuda", dtype).eval()


@pytest.fixture(scope="module", autouse=True)
def no_tf32():
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def grouped(*values, group: str):
    """A parametrize entry in xdist group `group`: under `pytest -n N --dist loadgroup`
    (scripts/gpu_check.sh) every test of one artifact runs in one worker, which compiles it once."""
    return pytest.param(*values, marks=pytest.mark.xdist_group(group))


@pytest.fixture(scope="module")
def cuda_artifact(tmp_path_factory, fixtures):
    """cuda_artifact(attention, dtype) -> the tiny model's artifact for this GPU, compiled on first
    use (with training graphs in fp32); skips the test for a kernel this GPU lacks."""
    out = tmp_path_factory.mktemp("cuda")
    built = {}

    def get(attention: str, dtype: str) -> Path:
        if (attention, dtype) not in built:
            target = resolve("cuda", "auto", dtype)
            if not attention_runs_on(attention, torch.device("cuda"), target.dtype):
                pytest.skip(f"{torch.cuda.get_device_name()} has no {attention} attention kernel for {dtype}")
            directory = out / f"tiny-{attention}-{dtype}" / target.dir_name
            compile_artifact(
                fixtures.tiny_model(attention),
                target,
                directory,
                f"tiny-{attention}-{dtype}",
                fixtures.tokenizer(),
                attention=attention,
                max_batch=4,
                quiet=True,
                train=fixtures.OPTIMIZER if dtype == "fp32" else None,
            )
            built[(attention, dtype)] = directory
        return built[(attention, dtype)]

    return get


MATH_FP32 = pytest.mark.xdist_group("math-fp32")  # the artifact most tests use


@MATH_FP32
def test_manifest_records_the_gpu_and_its_versions(cuda_artifact):
    manifest = json.loads((cuda_artifact("math", "fp32") / "manifest.json").read_text())
    major, minor = torch.cuda.get_device_capability()
    t = manifest["target"]
    assert t["device"] == "cuda" and t["arch"] == f"sm_{major}{minor}"
    assert t["compute_capability"] == f"{major}.{minor}" and t["gpu_name"] == torch.cuda.get_device_name()
    assert t["cuda_version"] == torch.version.cuda and t["cudnn_version"] == torch.backends.cudnn.version()


@pytest.mark.parametrize("attention,dtype", [grouped(a, d, group=f"{a}-{d}") for a, d in CASES])
def test_cuda_prefill_and_decode_match_eager_on_the_gpu(cuda_artifact, fixtures, attention, dtype):
    graphs = ArtifactGraphs(cuda_artifact(attention, dtype))
    torch_dtype = resolve("cuda", "auto", dtype).dtype
    eager = eager_on_gpu(fixtures, attention, torch_dtype)
    tol = TOL[torch_dtype]
    idx = torch.randint(0, fixtures.CONFIG.vocab_size, (3, 7), device="cuda")
    kv_c, kv_e = graphs.new_kv_cache(3), eager.new_kv_cache(3)
    with torch.no_grad():
        torch.testing.assert_close(graphs.prefill(idx, kv_c), eager.prefill(idx, kv_e), atol=tol, rtol=tol)
        for t in range(7, 12):
            tok = torch.full((3, 1), t, device="cuda")
            pos = torch.tensor([t, t + 3, t - 5], device="cuda")  # each row at its own position
            torch.testing.assert_close(graphs.decode(tok, pos, kv_c), eager.decode(tok, pos, kv_e), atol=tol, rtol=tol)


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_cuda_int8_graphs_match_the_eager_int8_reference_on_the_gpu(tmp_path, fixtures, dtype):
    """--quantize int8 on the GPU: every int8 form with a CUDA kernel is measured; whichever each graph
    got, prefill and decode (batch 3 and 1) equal the dequantised model's eager logits."""
    target = resolve("cuda", "auto", dtype)
    directory = tmp_path / "tiny-int8" / target.dir_name
    manifest = compile_artifact(
        fixtures.tiny_model("math"),
        target,
        directory,
        name="tiny-int8",
        tokenizer=fixtures.tokenizer(),
        attention="math",
        max_batch=8,
        quiet=True,
        quantize="int8",
    )
    print({g: manifest["graphs"][g]["linear"] for g in ("prefill", "decode", "decode_one")})
    reference = dequantized(quantize_int8(fixtures.tiny_model("math"), target.dtype).to("cuda", target.dtype))
    graphs = ArtifactGraphs(directory)
    tol = TOL[target.dtype]
    idx = torch.randint(0, fixtures.CONFIG.vocab_size, (3, 7), device="cuda")
    for rows in (3, 1):
        kv_c, kv_e = graphs.new_kv_cache(rows), reference.new_kv_cache(rows)
        with torch.no_grad():
            got, want = graphs.prefill(idx[:rows], kv_c), reference.prefill(idx[:rows], kv_e)
            torch.testing.assert_close(got, want, atol=tol, rtol=tol)
            for t in range(7, 12):
                tok = torch.full((rows, 1), t, device="cuda")
                pos = torch.tensor([t, t + 3, t - 5][:rows], device="cuda")
                got, want = graphs.decode(tok, pos, kv_c), reference.decode(tok, pos, kv_e)
                torch.testing.assert_close(got, want, atol=tol, rtol=tol)


@pytest.mark.parametrize("attention", [grouped(a, group=f"{a}-fp32") for a in ("math", "efficient")])
def test_cuda_train_step_gives_eager_loss_and_every_gradient(cuda_artifact, fixtures, attention):
    directory = cuda_artifact(attention, "fp32")
    manifest = json.loads((directory / "manifest.json").read_text())
    package = torch._inductor.aoti_load_package(str(directory / manifest["training"]["train_step"]["file"]))
    model = eager_on_gpu(fixtures, attention, torch.float32).train()
    gen = torch.Generator().manual_seed(7)
    x, y = (torch.randint(0, fixtures.CONFIG.vocab_size, (3, 17), generator=gen).cuda() for _ in "xy")
    assert training.train_step_error(package, model, x, y) < 1e-4  # loss and every gradient, fp32 without TF32


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    if not CLI.exists():
        pytest.skip(f"{CLI} is not built (scripts/build.sh)")
    return subprocess.run([str(CLI), *args], capture_output=True, text=True, timeout=300, env=env)


@MATH_FP32
def test_runtime_generates_the_eager_greedy_tokens_on_the_gpu(cuda_artifact, fixtures):
    directory = cuda_artifact("math", "fp32")
    done = run_cli("generate", str(directory), "-p", fixtures.PROMPT, "-n", "24", "--temperature", "0")
    assert done.returncode == 0, done.stderr
    model = eager_on_gpu(fixtures, "math", torch.float32)
    stoi = {ch: i for i, ch in enumerate(fixtures.VOCAB)}
    idx = torch.tensor([[stoi[ch] for ch in fixtures.PROMPT]], device="cuda")
    with torch.no_grad():
        for _ in range(24):
            logits, _ = model(idx)
            idx = torch.cat([idx, logits[:, -1, : fixtures.CONFIG.vocab_size].argmax(-1, keepdim=True)], dim=1)
    expected = "".join(fixtures.VOCAB[i] for i in idx[0, len(fixtures.PROMPT) :].tolist())
    assert expected in done.stdout


@MATH_FP32
def test_runtime_refuses_an_artifact_for_another_arch(cuda_artifact, tmp_path):
    source = cuda_artifact("math", "fp32")
    foreign = tmp_path / "sm_10"
    shutil.copytree(source, foreign)
    manifest = json.loads((foreign / "manifest.json").read_text())
    present = manifest["target"]["arch"]
    other = "sm_80" if present != "sm_80" else "sm_90"
    manifest["target"]["arch"] = other
    (foreign / "manifest.json").write_text(json.dumps(manifest))
    done = run_cli("verify", str(foreign))
    assert done.returncode != 0
    assert "GPT_ERR_DEVICE_MISMATCH" in done.stderr and f"artifact is {other}, this GPU is {present}" in done.stderr


@MATH_FP32
def test_nccl_with_world_size_1_trains_like_the_plain_trainer(cuda_artifact, artifacts):
    """The distributed path on one GPU: c10d's TCPStore and NCCL, an all-reduce over one rank."""
    directory = cuda_artifact("math", "fp32")
    args = ["train", str(directory), "--data", str(artifacts / "corpus"), "--iters", "4", "--warmup", "1"]
    args += ["--batch", "4", "--eval-every", "2", "--eval-iters", "2", "--seed", "3"]
    plain = run_cli(*args, env={k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK")})
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    rank = {"WORLD_SIZE": "1", "RANK": "0", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    nccl = run_cli(*args, env={**os.environ, "GPT_LOG": "info", **rank})
    assert plain.returncode == 0, plain.stderr
    assert nccl.returncode == 0, nccl.stderr
    assert "rank 0 of 1 joined" in nccl.stderr and "(nccl)" in nccl.stderr
    losses = [re.search(r"^done: .*; (val loss .*)$", run.stdout, re.M).group(1) for run in (plain, nccl)]
    assert losses[0] == losses[1]
