"""An int8 KV cache (compile --kv-dtype int8; gpt.KV_DTYPES): the manifest records it (format 16); decode's graphs
read it through the kernel library's attention and a prompt's tokens round it as that kernel does (model/kv_q8.py)
and attend to its values with SDPA; the compiled graphs equal eager PyTorch over the same cache, and lie within
bf16's own rounding of eager PyTorch over an fp32 cache; the runtime verifies the artifact and generates the
compiled graphs' greedy tokens; a compile that could not read it is refused. The kernel on each vector path:
tests/kernels/test_decode_attention.cpp; what it costs a trained model's loss: tests/aot/test_int8_accuracy.py."""

import copy
import json
import os
import subprocess
from pathlib import Path

import pytest
import torch

from gpt_aot.artifact.loader import ArtifactGraphs
from gpt_aot.compiler import packages
from gpt_aot.compiler.pipeline import check_kv_dtype
from gpt_aot.compiler.target import Target, resolve
from gpt_aot.model import kernels, kv_q8

ROOT = Path(__file__).resolve().parents[2]
CLI = Path(os.environ.get("GPT_CLI", ROOT / "build" / "cli" / "gpt"))
NAME = "tiny-kv-int8"
OPERATOR, ROWS_OPERATOR = "gpt_kernels::decode_attention", "gpt_kernels::decode_attention_rows"
# Compiled graphs against eager over the same cache, both bf16: the logits (|x| < 1) differ by bf16 rounding in
# another order (panels against mm linears, measured 0.002-0.004), and a key rounded to the next int8 level where
# the two computed it a bit apart.
SAME_CACHE_TOL = 8e-3


def directory(artifacts: Path) -> Path:
    return artifacts / NAME / "cpu"


def eager(fixtures, kv_dtype: str | None, dtype=torch.bfloat16):
    """The fixture's model as compile saw it; over an int8 cache decode reads with the chunked kernel."""
    model = copy.deepcopy(fixtures.fixture_model(NAME, "math", fixtures.SEED)).to(dtype)
    model.set_kv_dtype(kv_dtype)
    model.set_attention("chunked" if kv_dtype else "math")
    return model


def dequantized(kv: torch.Tensor) -> torch.Tensor:
    """An int8 cache's values: each position's int8 values times its fp32 scale (the last four bytes)."""
    d = kv.shape[-1] - 4
    scale = kv[..., d:].contiguous().view(torch.float32)
    return kv[..., :d].float() * scale


def test_the_manifest_records_the_cache_and_decodes_graphs_attend_through_the_kernel(artifacts):
    manifest = json.loads((directory(artifacts) / "manifest.json").read_text())
    assert manifest["format_version"] == 16
    head_dim = manifest["model"]["n_embd"] // manifest["model"]["n_head"]
    assert manifest["kv_cache"]["dtype"] == "int8" and manifest["kv_cache"]["position_bytes"] == head_dim + 4
    # Prefill's kernel as the fixture pinned it (SDPA's math); decode's pinned by the cache.
    assert (manifest["attention"]["backend"], manifest["attention"]["decode"]["backend"]) == ("math", "chunked")
    attention = {OPERATOR, ROWS_OPERATOR}
    calls = {g: packages.kernel_operators(directory(artifacts) / f"{g}.pt2") & attention for g in manifest["graphs"]}
    # Decode's steps, and the mixed graph's (a step's rows and a prompt's piece, each a query over the cache it
    # writes), call the kernel; a prompt's tokens (prefill, extend) attend with SDPA.
    expected = {"prefill": set(), "decode": {OPERATOR}, "decode_one": {OPERATOR}}
    assert calls == {**expected, "extend": set(), "mixed": {ROWS_OPERATOR}}


def test_a_prompts_tokens_are_rounded_to_the_kernels_own_bytes():
    """kv_q8.store against the kernel writing the same keys and values (decode_attention, one new position a row):
    byte for byte, rows of zeros, of tiny and huge magnitudes and a non-finite one included; kv_q8.values reads back
    exactly the values store returned."""
    kernels.load()
    gen = torch.Generator().manual_seed(13)
    rows, heads, d = 6, 3, 20
    k = torch.randn(rows, heads, 1, d, generator=gen) * torch.logspace(-30, 30, rows).view(rows, 1, 1, 1)
    v = torch.randn(rows, heads, 1, d, generator=gen)
    k[1, 0], v[2, 1], k[3, 2, 0, 5] = 0.0, 0.0, float("inf")
    q = torch.randn(rows, heads, 1, d, generator=gen)
    k_cache, v_cache = (torch.zeros(rows, heads, 4, d + kv_q8.SCALE_BYTES, dtype=torch.int8) for _ in range(2))
    pos = torch.tensor([0, 1, 2, 3, 0, 1])
    torch.ops.gpt_kernels.decode_attention(q, k, v, k_cache, v_cache, pos, d**-0.5)
    for x, cache in ((k, k_cache), (v, v_cache)):
        stored, values = kv_q8.store(x)
        written = cache[torch.arange(rows), :, pos].unsqueeze(2)  # (rows, heads, 1, d + 4)
        assert torch.equal(stored, written)
        torch.testing.assert_close(kv_q8.values(stored, torch.float32), values, rtol=0, atol=0, equal_nan=True)
    scale = k_cache[3, 2, 3, d:].contiguous().view(torch.float32)
    assert scale.isnan().all() and (k_cache[3, 2, 3, :d] == 0).all()  # the non-finite row: NaN scale, zeros


def test_compiled_graphs_equal_eager_over_the_same_int8_cache(artifacts, fixtures):
    """Three rows: a prefill of 7 tokens, decode steps at each row's own position, then 4 tokens appended to each
    (extend) and a mixed call of a step and a piece; logits within SAME_CACHE_TOL, the caches' values within two
    int8 levels of the largest position's."""
    graphs, model = ArtifactGraphs(directory(artifacts)), eager(fixtures, "int8")
    gen = torch.Generator().manual_seed(11)
    idx = torch.randint(0, fixtures.CONFIG.vocab_size, (3, 30), generator=gen)
    kv_c, kv_e = graphs.new_kv_cache(3), model.new_kv_cache(3)
    assert kv_c.dtype == kv_e.dtype == torch.int8 and kv_c.shape == kv_e.shape

    def close(got, expected, what):
        torch.testing.assert_close(got.float(), expected.float(), atol=SAME_CACHE_TOL, rtol=0, msg=what)

    with torch.no_grad():
        close(graphs.prefill(idx[:, :7], kv_c), model.prefill(idx[:, :7], kv_e), "prefill")
        for t in range(7, 11):
            pos, tok = torch.tensor([t, t + 3, t - 5]), idx[:, t : t + 1]
            close(graphs.decode(tok, pos, kv_c), model.decode(tok, pos, kv_e), f"decode at {t}")
        start = torch.tensor([11, 14, 6])
        new = idx[:, 11:15]
        close(graphs.extend(new, start, kv_c), model.extend(new, start, kv_e), "extend")
        seq, pos, last = torch.tensor([0, 2, 2, 2]), torch.tensor([15, 10, 11, 12]), torch.tensor([0, 3])
        tokens = idx[seq, pos].view(-1, 1)
        close(graphs.mixed(tokens, pos, seq, last, kv_c), model.mixed(tokens, pos, seq, last, kv_e), "mixed")
    values_c, values_e = dequantized(kv_c), dequantized(kv_e)
    level = kv_e[..., -4:].contiguous().view(torch.float32).max().item()
    assert (values_c - values_e).abs().max().item() <= 2 * level
    assert (values_e != 0).any()


def test_an_int8_cache_stays_within_bf16s_rounding_of_an_fp32_cache(artifacts, fixtures):
    """The outside reference: eager PyTorch in fp32 with its fp32 cache and SDPA. The int8-cache artifact's logits lie
    no further from it than twice the same bf16 model's over a bf16 cache (measured: about as far)."""
    graphs = ArtifactGraphs(directory(artifacts))
    fp32, bf16 = eager(fixtures, None, torch.float32), eager(fixtures, None)
    gen = torch.Generator().manual_seed(12)
    idx = torch.randint(0, fixtures.CONFIG.vocab_size, (2, 24), generator=gen)
    caches = [m.new_kv_cache(2) for m in (graphs, fp32, bf16)]
    worst = {"int8": 0.0, "bf16": 0.0}
    with torch.no_grad():
        steps = [lambda m, kv: m.prefill(idx[:, :8], kv)]
        steps += [lambda m, kv, t=t: m.decode(idx[:, t : t + 1], torch.tensor([t, t]), kv) for t in range(8, 24)]
        for step in steps:
            got, exact, rounded = (step(m, kv).float() for m, kv in zip((graphs, fp32, bf16), caches, strict=True))
            worst["int8"] = max(worst["int8"], (got - exact).abs().max().item())
            worst["bf16"] = max(worst["bf16"], (rounded - exact).abs().max().item())
    assert 0 < worst["int8"] <= 2 * worst["bf16"], worst


@pytest.mark.skipif(not CLI.exists(), reason=f"gpt CLI not built at {CLI}")
def test_the_runtime_verifies_it_names_its_cache_and_generates_the_compiled_graphs_greedy_tokens(artifacts, fixtures):
    out = directory(artifacts)
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    done = subprocess.run([str(CLI), "verify", str(out)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    done = subprocess.run([str(CLI), "info", str(out)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0 and "\nkv_cache     int8\n" in done.stdout, (done.stdout, done.stderr[-2000:])
    prompt = "Hello"
    ids = [fixtures.VOCAB.index(c) for c in prompt]
    graphs = ArtifactGraphs(out)
    with torch.no_grad():  # the full block: the cache's last positions too
        kv = graphs.new_kv_cache(1)
        logits, expected = graphs.prefill(torch.tensor([ids]), kv), []
        for pos in range(len(ids), fixtures.CONFIG.block_size):
            expected.append(int(logits[0, : fixtures.CONFIG.vocab_size].argmax()))
            logits = graphs.decode(torch.tensor([[expected[-1]]]), torch.tensor([pos]), kv)
    n = fixtures.CONFIG.block_size - len(ids)
    command = [str(CLI), "generate", str(out), "-p", prompt, "-n", str(n), "--ignore-eos", "--temperature", "0"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.rstrip("\n") == prompt + "".join(fixtures.VOCAB[t] for t in expected)


def test_a_cache_the_target_or_the_decode_attention_cannot_read_is_refused():
    cpu = resolve("cpu", "auto", "bf16", "native")
    check_kv_dtype(None, cpu, "math")  # a float cache: any attention
    check_kv_dtype("int8", cpu, None)  # decode's kernel left to the compile: chunked
    check_kv_dtype("int8", cpu, "chunked")
    with pytest.raises(ValueError, match="read by the chunked attention only: --decode-attention math"):
        check_kv_dtype("int8", cpu, "math")
    with pytest.raises(ValueError, match="is not one of int8"):
        check_kv_dtype("int4", cpu, None)
    with pytest.raises(ValueError, match="not on cuda"):
        check_kv_dtype("int8", Target("cuda", "sm_90", torch.bfloat16, {}), None)  # described: no GPU here
