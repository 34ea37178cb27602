"""What int8 and int4 cost a trained model: the README demo's model (char-small) and
a larger GPT-2-architecture model on the corpus's 1024-token BPE (bias, tanh GELU),
each trained briefly, their validation loss in int8 and in int4 (groups of 32; and
int4 through the kernel library's linear, activations rounded to int8, and int8 so
too, the q8 form) within 1 %
of bf16's, and greedy agreement over 256 tokens reported; int4 in groups of 64 through the
kernel is reported, not bounded (char-small 1.24 % over bf16); an int8 KV cache's loss, every
token through the cache, within 1 % of a bf16 cache's (tests/fixtures/int8_accuracy.py;
bench/int8_accuracy.py does the same for a 12 M parameter BPE model)."""

import json
from dataclasses import replace

import int8_accuracy
import numpy as np
import pytest

from gpt_aot.importers.tokenizer_import import read_tokenizer
from gpt_aot.model.config import PRESETS
from gpt_aot.model.gpt import GPTConfig
from gpt_aot.text.tokenizer import encode

# Minutes of eager training apiece; the compiled int8 and int4 graphs equal this eager reference
# (test_quantize.py, test_int4.py), so what changes these numbers is model/quantize.py alone.
pytestmark = pytest.mark.full

STEPS = 300  # ~20 s on 2 cores: the loss is well below the unigram model's (~3.0) by then


def test_int8_and_int4_keep_the_demo_models_validation_loss_within_1_percent(artifacts, fixtures, record_property):
    corpus = artifacts / "corpus"
    train = np.fromfile(corpus / "train.bin", dtype=np.uint16)
    val = np.fromfile(corpus / "val.bin", dtype=np.uint16)
    config = replace(GPTConfig(**PRESETS["char-small"]), vocab_size=len(fixtures.VOCAB))
    model = int8_accuracy.train_briefly(config, train, STEPS)
    stoi = {ch: i for i, ch in enumerate(fixtures.VOCAB)}
    report = int8_accuracy.compare(model, val, [stoi[ch] for ch in "And God said"])
    record_property("quantized_accuracy", json.dumps(report))
    print("int8 and int4 accuracy (char-small):", json.dumps(report))
    losses = report["val_loss"]
    assert losses["bf16"] < 2.6, "the model did not learn the corpus: the comparison would mean nothing"
    # measured: int8 1.0015, int4 1.0011, int4-kernel 1.0015, int8-q8 1.0004; int4 in groups of 64 1.0124, over
    # the bound: reported, not bounded (the default groups stay 32; bench/int4_error.py compares their weights' error)
    for scheme in ("int8", "int4", "int4-kernel", "int8-q8"):
        assert abs(report[scheme]["over_bf16"] - 1) <= 0.01, report
        # Reported, not bounded: greedy decoding may part at a near-tie and continue differently.
        agreement = report[scheme]
        assert 0 <= agreement["greedy_same_prefix"] <= agreement["greedy_same_positions"] <= 256
    check_kv_int8(report["kv-int8"])


def check_kv_int8(kv: dict):
    """The int8 KV cache's loss within 1 % of the bf16 cache's, which itself agrees with the plain forward."""
    assert abs(kv["bf16_cache_over_forward"] - 1) <= 0.01, kv  # the cached path computes the same model
    assert abs(kv["over_bf16"] - 1) <= 0.01, kv
    assert 0 <= kv["greedy_same_prefix"] <= kv["greedy_same_positions"] <= kv["greedy_tokens"], kv


# 4 layers, 192 wide (whole groups of 64 inputs), the fixture's 1024-token BPE: 2 M parameters to char-small's 0.8 M
BPE_CONFIG = GPTConfig(block_size=64, vocab_size=1024, n_layer=4, n_head=4, n_embd=192, bias=True, gelu="tanh")
BPE_STEPS = 250


def unigram_loss(train: np.ndarray, val: np.ndarray, vocab: int) -> float:
    """The validation loss of predicting every token by its frequency in the training set (add-one)."""
    counts = np.bincount(train, minlength=vocab) + 1.0
    return float(-np.log(counts / counts.sum())[val].mean())


def test_int8_and_int4_keep_a_bpe_models_validation_loss_within_1_percent(artifacts, record_property):
    data = artifacts / "bible_bpe"
    train = np.fromfile(data / "train.bin", dtype=np.uint16)
    val = np.fromfile(data / "val.bin", dtype=np.uint16)
    assert int(train.max()) < BPE_CONFIG.vocab_size
    model = int8_accuracy.train_briefly(BPE_CONFIG, train, BPE_STEPS)
    prompt = encode(read_tokenizer(data / "tokenizer.json"), "And God said")
    report = int8_accuracy.compare(model, val, prompt)
    record_property("quantized_accuracy_bpe", json.dumps(report))
    print("int8 and int4 accuracy (BPE, 2 M):", json.dumps(report))
    # measured: bf16 4.50 (192 wide; 4.52 at 160) against the unigram model's 5.81
    assert report["val_loss"]["bf16"] < unigram_loss(train, val, BPE_CONFIG.vocab_size) - 0.5, report
    # measured (192 wide): int8 0.9990, int4 0.9986, int4-kernel 0.9983, int8-q8 1.0000; int4 in groups of 64 1.0007,
    # reported as for char-small
    for scheme in ("int8", "int4", "int4-kernel", "int8-q8"):
        assert abs(report[scheme]["over_bf16"] - 1) <= 0.01, report
        agreement = report[scheme]
        assert 0 <= agreement["greedy_same_prefix"] <= agreement["greedy_same_positions"] <= 256
    # measured: the int8 cache's loss 1.000009 of the bf16 cache's, greedy tokens through both the same over all 62
    check_kv_int8(report["kv-int8"])
