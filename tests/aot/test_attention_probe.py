"""Each attention kernel is probed the way the model calls it (#30's item 3): causal
with no mask for the prefill and training, a mask of the visible positions for
decode. A kernel that takes no mask — FlashAttention on CUDA — is still a
candidate for the prefill and training; before, one masked probe ruled it out
everywhere. On this CPU flash takes masks, so a kernel that refuses them is
simulated by refusing flash's masked call in the probe."""

import pytest
import torch

from gpt_aot.compiler import attention_pick
from gpt_aot.compiler.target import resolve
from gpt_aot.model import attention


@pytest.fixture
def flash_without_masks(monkeypatch):
    """`attention.attend` as on CUDA: flash raises on a mask, as PyTorch's flash kernel does there."""
    real = attention.attend

    def attend(kind, q, k, v, mask=None, dropout_p=0.0):
        if kind == "flash" and mask is not None:
            raise RuntimeError("No available kernel. Aborting execution.")
        return real(kind, q, k, v, mask, dropout_p)

    monkeypatch.setattr(attention, "attend", attend)


def test_the_cpu_kernels_run_both_calls():
    cpu = torch.device("cpu")
    for kind in ("naive", "math", "flash"):
        assert all(attention.attention_runs_on(kind, cpu, torch.float32, call) for call in attention.ATTENTION_CALLS)
    assert not attention.attention_runs_on("cudnn", cpu, torch.float32, "causal")
    with pytest.raises(ValueError, match="not one of causal, masked"):
        attention.attention_runs_on("math", cpu, torch.float32, "bidirectional")


def test_a_kernel_without_masks_is_a_candidate_for_prefill_and_training_not_decode(fixtures, flash_without_masks):
    cpu = torch.device("cpu")
    assert attention.attention_runs_on("flash", cpu, torch.float32, "causal")
    assert not attention.attention_runs_on("flash", cpu, torch.float32, "masked")
    model = fixtures.tiny_model("math")
    prefill = attention_pick.measure(model, repeats=1)
    assert prefill["flash"]["runs"] and prefill["flash"]["max_abs_err"] < 1e-5
    training = attention_pick.measure_training(model, repeats=1)
    assert training["flash"]["runs"] and training["flash"]["max_abs_err"] < 1e-5
    decode = attention_pick.measure_decode(model, resolve("cpu", "auto", "fp32"), repeats=1)
    assert decode["flash"] == {"runs": False} and decode["math"]["runs"]


def test_a_pinned_kernel_must_run_the_call_of_its_graph(fixtures, flash_without_masks):
    model, target = fixtures.tiny_model("math"), resolve("cpu", "auto", "fp32")
    prefill = attention_pick.choose_attention(model, target, "flash")
    training = attention_pick.choose_attention(model, target, "flash", attention_pick.measure_training)
    assert prefill["backend"] == training["backend"] == "flash"
    with pytest.raises(ValueError, match=r"no kernel for the masked call \(decode\)"):
        attention_pick.choose_attention(model, target, "flash", attention_pick.measure_decode)
