"""Dataset preparation in nanoGPT's shakespeare_char format."""

import json
import shutil

import numpy as np
import pytest

from gpt_aot.text import data


def test_prepare_writes_uint16_split_and_vocabulary(tmp_path):
    text = "hello world\n" * 50
    stats = data.prepare(tmp_path, text)
    train = np.fromfile(tmp_path / "train.bin", dtype=np.uint16)
    val = np.fromfile(tmp_path / "val.bin", dtype=np.uint16)
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert len(train) == int(len(text) * 0.9) == stats["train_tokens"]
    assert len(train) + len(val) == len(text)
    assert meta["itos"] == sorted(set(text)) and meta["vocab_size"] == 9
    decoded = "".join(meta["itos"][i] for i in np.concatenate([train, val]))
    assert decoded == text


@pytest.mark.skipif(shutil.which("bible") is None, reason="bible-kjv not installed (scripts/setup.sh installs it)")
def test_corpus_is_real_english_text():
    text = data.corpus_text()
    assert len(text) > 1_000_000
    assert "In the beginning God created the heaven and the earth." in text
