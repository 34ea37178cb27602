"""Char-level dataset in nanoGPT's shakespeare_char format.

train.bin / val.bin hold uint16 token ids (90/10 split); meta.json holds the
vocabulary. The text is the King James Bible as Debian's bible-kjv package
prints it: a real English corpus available without network access.
"""

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np

from gpt_aot.base.files import replaced_atomically

SEED_TRAIN_TOKENS = 1_003_854  # shakespeare_char's train split, for comparison
BIBLE_RANGE = "Gen1:1-Rev22:21"


def corpus_text() -> str:
    exe = shutil.which("bible")
    if exe is None:
        raise RuntimeError("the 'bible' command is missing: run scripts/setup.sh (installs bible-kjv)")
    return subprocess.run([exe, BIBLE_RANGE], check=True, capture_output=True, text=True).stdout


def char_vocab(text: str) -> list[str]:
    return sorted(set(text))


def prepare(out_dir: Path, text: str | None = None) -> dict:
    """Write train.bin, val.bin and meta.json; return the token counts."""
    text = corpus_text() if text is None else text
    itos = char_vocab(text)
    if len(itos) > np.iinfo(np.uint16).max:
        raise ValueError("vocabulary does not fit uint16 token ids")
    stoi = {ch: i for i, ch in enumerate(itos)}
    ids = np.fromiter((stoi[ch] for ch in text), dtype=np.uint16, count=len(text))
    split = int(len(ids) * 0.9)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, part in (("train.bin", ids[:split]), ("val.bin", ids[split:])):
        with replaced_atomically(out_dir / name) as tmp:
            part.tofile(tmp)
    meta = {"kind": "char", "vocab_size": len(itos), "itos": itos}
    with replaced_atomically(out_dir / "meta.json") as tmp:
        tmp.write_text(json.dumps(meta, ensure_ascii=False))
    return {"chars": len(text), "vocab_size": len(itos), "train_tokens": split, "val_tokens": len(ids) - split}


def main(out_dir: str) -> None:
    stats = prepare(Path(out_dir))
    print(
        f"dataset {out_dir}: {stats['chars']:,} characters, vocab {stats['vocab_size']}, "
        f"train {stats['train_tokens']:,} tokens, val {stats['val_tokens']:,} tokens "
        f"(shakespeare_char: train {SEED_TRAIN_TOKENS:,})"
    )
