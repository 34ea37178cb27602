"""Tokenizer description stored in an artifact (tokenizer.json).

Kinds: "char" (a list of characters, id = index, as nanoGPT's shakespeare_char
meta) and "none" (the runtime takes and returns token ids only).
"""

import json
from pathlib import Path


def char_tokenizer(meta_path: Path) -> dict:
    meta = json.loads(Path(meta_path).read_text())
    if meta.get("kind", "char") != "char" or not isinstance(meta.get("itos"), list):
        raise ValueError(f"{meta_path}: expects a char vocabulary with an 'itos' list")
    return {"kind": "char", "itos": meta["itos"]}


def no_tokenizer() -> dict:
    return {"kind": "none"}


def encode(tokenizer: dict, text: str) -> list[int]:
    if tokenizer["kind"] != "char":
        raise ValueError("this tokenizer has no text encoding")
    stoi = {ch: i for i, ch in enumerate(tokenizer["itos"])}
    return [stoi[ch] for ch in text if ch in stoi]
