"""The golden vector's bound (gpt_aot.artifact.golden.golden_tolerance): fixed for fp32; for bf16
calibrated to the model's own rounding noise, so that another correct kernel passes and a wrong
one fails where the former fixed 5e-2 let it through. Eager PyTorch on the CPU throughout."""

from unittest import mock

import pytest
import torch

from gpt_aot.artifact.golden import GOLDEN_TOLERANCE, golden_tolerance, golden_vector
from gpt_aot.model import attention
from gpt_aot.model.gpt import GPT, GPTConfig
from gpt_aot.model.quantize import quantize_int8

GPT2_SHAPE = GPTConfig(block_size=1024, vocab_size=50304, n_layer=12, n_head=12, n_embd=768, bias=True)


def logits_like_verify(model: GPT, golden: dict) -> dict:
    """The golden's two logits recomputed with `model` from the golden's own tokens, as the
    runtime's verify does (a near-tie in the prefill cannot change the decode's token)."""
    tokens, n = golden["tokens"], golden["tokens"].size(1)
    kv = model.new_kv_cache(1)
    with torch.no_grad():
        prefill = model.prefill(tokens, kv)
        decode = model.decode(golden["decode_token"], torch.tensor([n]), kv)
    return {"prefill_logits": prefill.float(), "decode_logits": decode.float()}


def passes(actual: dict, golden: dict, atol: float, rtol: float) -> bool:
    """The runtime's check (exec/model.cpp): |actual - expected| <= atol + rtol * |expected|."""
    return all(
        ((actual[k] - golden[k]).abs() <= atol + rtol * golden[k].abs()).all().item()
        for k in ("prefill_logits", "decode_logits")
    )


def attention_output_scaled(factor: float):
    """A wrong attention kernel: the naive one with its output `factor` too large (a normalisation bug)."""
    naive = attention._naive
    return mock.patch.object(attention, "_naive", lambda q, k, v, mask, p: naive(q, k, v, mask, p) * factor)


def bf16_golden(model: GPT, kind: str = "math") -> tuple[GPT, dict, tuple[float, float]]:
    model = model.to(torch.bfloat16).eval()
    model.set_attention(kind)
    golden = golden_vector(model)
    return model, golden, golden_tolerance(model, golden, torch.bfloat16)


def test_fp32_keeps_the_fixed_bound(fixtures):
    model = fixtures.tiny_model("math").eval()
    assert golden_tolerance(model, golden_vector(model), torch.float32) == GOLDEN_TOLERANCE[torch.float32]


def test_bf16_bound_passes_another_kernel_and_catches_a_wrong_one_the_fixed_bound_passed(fixtures):
    model, golden, (atol, rtol) = bf16_golden(fixtures.tiny_model("math"))
    assert rtol == 0.0
    assert atol < GOLDEN_TOLERANCE[torch.bfloat16][0] / 2  # this model's logits are small (max ~2)

    model.set_attention("flash")  # correct, other rounding
    assert passes(logits_like_verify(model, golden), golden, atol, rtol)

    model.set_attention("naive")
    with attention_output_scaled(1.1):
        wrong = logits_like_verify(model, golden)
    assert not passes(wrong, golden, atol, rtol)
    assert passes(wrong, golden, *GOLDEN_TOLERANCE[torch.bfloat16])  # what the fixed bound let through


@pytest.mark.parametrize("quantized", [False, True])
def test_bf16_bound_on_gpt2_shapes(quantized):
    """GPT-2 124M's shapes (random weights), plain and int8: the bound sits above another
    kernel's rounding and below a wrong kernel's error."""
    torch.manual_seed(0)
    model = GPT(GPT2_SHAPE)
    if quantized:
        model = model.to(torch.bfloat16)
        quantize_int8(model, torch.bfloat16)
    model, golden, (atol, rtol) = bf16_golden(model)
    peak = max(golden[k].abs().max().item() for k in ("prefill_logits", "decode_logits"))
    assert 0.01 * peak < atol < 0.05 * peak  # measured: 2.5 % of the largest logit

    model.set_attention("flash")
    assert passes(logits_like_verify(model, golden), golden, atol, rtol)
    model.set_attention("naive")
    with attention_output_scaled(1.1):
        assert not passes(logits_like_verify(model, golden), golden, atol, rtol)
