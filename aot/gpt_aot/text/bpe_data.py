"""Byte-level BPE dataset in nanoGPT's format (prepare-data --tokenizer bpe:N).

Trains a GPT-2-style tokenizer of N tokens on the corpus with Hugging Face
`tokenizers` (offline: ByteLevel with GPT-2's split, all 256 bytes in the
alphabet, `<|endoftext|>` as the one special token), then writes uint16
train.bin / val.bin (90/10 split, as data.py does for chars), the tokenizer as
tokenizer.json (HF format; `gpt_aot compile --tokenizer` reads it) and a
meta.json that points to it.
"""

import json
import re
from pathlib import Path

import numpy as np

from gpt_aot.base.files import replaced_atomically
from gpt_aot.text import data
from gpt_aot.text.tokenizer import EOT

CHUNK_LINES = 4096  # chunks (lines) per encode_batch call: bounded memory whatever the corpus size
CUT = re.compile(r"(?<=\S)\n")


def train_tokenizer(text: str, n: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=n,
        special_tokens=[EOT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(text.splitlines(keepends=True), trainer)
    tokenizer.encode_special_tokens = True  # "<|endoftext|>" in the corpus is text, as the canonical encoder has it
    return tokenizer


def chunks(text: str):
    """The text cut where GPT-2's split always cuts and nothing after depends on
    what came before: before a newline that follows a non-space character (no
    piece spans that point, and `\\s++$` cannot match at a chunk's end). Encoding
    the chunks one by one gives the ids of encoding the whole text at once.
    (str's whitespace includes all of Unicode's White_Space, so a cut here is never
    inside a whitespace run of the pattern's.)"""
    start = 0
    for m in CUT.finditer(text):
        if m.start() > start:
            yield text[start : m.start()]
            start = m.start()
    if start < len(text):
        yield text[start:]


def encode_chunked(tokenizer, text: str) -> np.ndarray:
    parts, batch = [], []
    for chunk in chunks(text):
        batch.append(chunk)
        if len(batch) == CHUNK_LINES:
            parts.append(np.array([i for e in tokenizer.encode_batch(batch) for i in e.ids], dtype=np.uint16))
            batch = []
    if batch:
        parts.append(np.array([i for e in tokenizer.encode_batch(batch) for i in e.ids], dtype=np.uint16))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint16)


def prepare(out_dir: Path, n: int, text: str | None = None) -> dict:
    """Write train.bin, val.bin, tokenizer.json and meta.json; return the counts."""
    if n < 257:
        raise ValueError(f"bpe:{n}: a byte-level BPE needs at least 257 tokens (256 bytes and {EOT})")
    if n > np.iinfo(np.uint16).max + 1:
        raise ValueError(f"bpe:{n}: token ids would not fit uint16 (at most {np.iinfo(np.uint16).max + 1} tokens)")
    text = data.corpus_text() if text is None else text
    tokenizer = train_tokenizer(text, n)
    size = tokenizer.get_vocab_size()
    ids = encode_chunked(tokenizer, text)
    split = int(len(ids) * 0.9)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, part in (("train.bin", ids[:split]), ("val.bin", ids[split:])):
        with replaced_atomically(out_dir / name) as tmp:
            part.tofile(tmp)
    with replaced_atomically(out_dir / "tokenizer.json") as tmp:
        tokenizer.save(str(tmp))
    meta = {"kind": "bpe", "vocab_size": size, "tokenizer": "tokenizer.json"}
    with replaced_atomically(out_dir / "meta.json") as tmp:
        tmp.write_text(json.dumps(meta))
    return {"chars": len(text), "vocab_size": size, "train_tokens": split, "val_tokens": len(ids) - split}


def main(out_dir: str, n: int) -> None:
    stats = prepare(Path(out_dir), n)
    print(
        f"dataset {out_dir}: {stats['chars']:,} characters, byte-level BPE of {stats['vocab_size']} tokens, "
        f"train {stats['train_tokens']:,} tokens, val {stats['val_tokens']:,} tokens"
    )
