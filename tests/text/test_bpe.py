"""The runtime's byte-level BPE (runtime/text, through tests/text/tokenizer_tool)
against tiktoken and Hugging Face `tokenizers`, built from the same vocabulary:
GPT-2's own (r50k_base) and the test dataset's BPE trained on the corpus.

Inputs: (a) every line of the corpus's validation split, (b) HARD_STRINGS,
(c) 10 000 seeded random Unicode strings. The runtime must give tiktoken's ids
for all of them (100 %); HF's tokenizer must agree with tiktoken too, or the
test names the strings where the two references differ. decode(encode(x)) == x
and the streaming detokenizer, fed one token at a time, reassembles x without
ever giving out an incomplete character.
"""

import json
import os
import random
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from gpt_aot.importers.tokenizer_import import read_tokenizer
from gpt_aot.text import data
from gpt_aot.text.tokenizer import to_hf, to_tiktoken

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))

import gpt2_ranks  # noqa: E402
from hard_strings import HARD_STRINGS  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TOOL = Path(os.environ.get("GPT_TOKENIZER_TOOL", ROOT / "build" / "tests" / "tokenizer_tool"))
EOT = "<|endoftext|>"


def random_strings(count: int, seed: int) -> list[str]:
    """Strings of assigned code points (Unicode 14, Python's and PCRE2 10.42's
    tables; an unassigned one may have a different class in a newer engine),
    mixing ASCII, whitespace of every kind, any plane's letters and marks, and
    emoji sequences, 0..40 characters each."""
    rng = random.Random(seed)
    whitespace = [" ", "\t", "\n", "\r", "\x0b", "\x0c", "\x85", "\xa0", "\u1680", "\u2003", "\u2028", "\u3000"]
    pools = [
        lambda: chr(rng.randint(0x20, 0x7E)),
        lambda: rng.choice(whitespace),
        lambda: chr(rng.randint(0xA0, 0x2FFF)),
        lambda: chr(rng.randint(0x3000, 0xFFFD)),
        lambda: chr(rng.randint(0x10000, 0x1FFFF)),
        lambda: chr(rng.randint(0x0300, 0x036F)),  # combining marks
        lambda: rng.choice(["\u200d", "\ufe0f", "\U0001f3fd", "\U0001f468", "\U0001f44d", "'s", "'LL", "0", "42"]),
    ]
    out = []
    while len(out) < count:
        chars = [rng.choice(pools)() for _ in range(rng.randint(0, 40))]
        text = "".join(c for c in chars if not (0xD800 <= ord(c[0]) <= 0xDFFF))
        if all(unicodedata.category(c) != "Cn" for c in text):
            out.append(text)
    return out


def validation_lines() -> list[str]:
    text = data.corpus_text()
    return text[int(len(text) * 0.9) :].split("\n")


def run_tool(canonical: dict, path: Path, texts: list[str], special: bool = False) -> list[dict]:
    path.write_text(json.dumps(canonical))
    lines = "".join(json.dumps({"text": t, "special": special}) + "\n" for t in texts)
    done = subprocess.run(
        [str(TOOL), str(path), "bpe", str(len(canonical["vocab"]))], input=lines.encode(), capture_output=True
    )
    assert done.returncode == 0, done.stdout.decode(errors="replace") + done.stderr.decode(errors="replace")
    replies = [json.loads(line) for line in done.stdout.decode().split("\n") if line]
    assert len(replies) == len(texts)
    return replies


@pytest.fixture(scope="module")
def gpt2() -> dict:
    return read_tokenizer(gpt2_ranks.path(), pattern="gpt2", special=[f"{EOT}=50256"])


@pytest.fixture(scope="module")
def corpus_bpe(artifacts) -> dict:
    return read_tokenizer(artifacts / "bible_bpe" / "tokenizer.json")


SETS = {
    "validation lines": validation_lines,
    "hard strings": lambda: HARD_STRINGS,
    "random strings": lambda: random_strings(10_000, seed=25),
}


@pytest.mark.parametrize("vocabulary", ["gpt2", "corpus_bpe"])
@pytest.mark.parametrize("inputs", list(SETS))
def test_ids_equal_tiktoken_and_hf(vocabulary, inputs, request, tmp_path):
    canonical = request.getfixturevalue(vocabulary)
    texts = SETS[inputs]()
    assert len(texts) >= {"validation lines": 3000, "hard strings": 200, "random strings": 10_000}[inputs]
    tiktoken_ids = to_tiktoken(canonical).encode_ordinary_batch(texts, num_threads=1)
    hf = to_hf(canonical)
    hf.encode_special_tokens = True  # "<|endoftext|>" in the text is text, as for encode_ordinary
    hf_ids = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
    replies = run_tool(canonical, tmp_path / "tokenizer.json", texts)

    runtime_wrong = [t for t, r, want in zip(texts, replies, tiktoken_ids, strict=True) if r.get("ids") != want]
    assert not runtime_wrong, f"{len(runtime_wrong)} of {len(texts)} differ from tiktoken, e.g. {runtime_wrong[:5]!r}"
    references_differ = [t for t, a, b in zip(texts, tiktoken_ids, hf_ids, strict=True) if a != b]
    assert not references_differ, f"tiktoken and HF tokenizers differ on {references_differ[:5]!r}"

    for text, reply in zip(texts, replies, strict=True):
        assert reply["decoded"] == text
        assert reply["streamed"] == text
        assert reply["broken_pieces"] == 0


def test_special_tokens_only_when_allowed(gpt2, tmp_path):
    texts = [f"a{EOT}b", EOT, f"{EOT}{EOT} x", f"<|endoftext {EOT}|>", "no special here"]
    enc = to_tiktoken(gpt2)
    ordinary = run_tool(gpt2, tmp_path / "t.json", texts)
    allowed = run_tool(gpt2, tmp_path / "t.json", texts, special=True)
    for text, plain, with_special in zip(texts, ordinary, allowed, strict=True):
        assert plain["ids"] == enc.encode_ordinary(text)
        assert with_special["ids"] == enc.encode(text, allowed_special="all")
    assert 50256 in allowed[0]["ids"] and 50256 not in ordinary[0]["ids"]


def test_streaming_never_breaks_a_character(gpt2, tmp_path):
    # GPT-2 spreads these characters over several tokens; a stream must hold the first bytes.
    texts = ["👨‍👩‍👧‍👦 family", "日本語", "🏳️‍🌈", "é" * 20, "𝟘𝟙𝟚"]
    enc = to_tiktoken(gpt2)
    assert any(len(enc.encode_ordinary(ch)) > 1 for ch in "👨日🏳𝟘")
    for text, reply in zip(texts, run_tool(gpt2, tmp_path / "t.json", texts), strict=True):
        assert reply["streamed"] == text
        assert reply["broken_pieces"] == 0
