"""A split pattern that does not cover every character (GPT-2's, cl100k's and
o200k's do): the runtime (through tests/text/tokenizer_tool) keeps each stretch
no match covers as a piece of its own, as Hugging Face `tokenizers`' Split
pre-tokenizer with behavior "isolated" does, so its ids equal HF's and
decode(encode(x)) == x. tiktoken would drop those stretches.
"""

import sys
from pathlib import Path

import pytest
import regex
from tokenizers import Regex, pre_tokenizers

from gpt_aot.importers.tokenizer_import import read_tokenizer
from gpt_aot.text.tokenizer import to_hf

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))

import gpt2_ranks  # noqa: E402
from hard_strings import HARD_STRINGS  # noqa: E402
from test_bpe import EOT, random_strings, run_tool  # noqa: E402

PATTERNS = {
    "letters": r"[a-z]+",
    "words with a space": r" ?\p{L}+",
    # GPT-2's as the fuzzer mutated it (fuzz/regressions/tokenizer/split-pattern-leaves-text-uncovered):
    # punctuation is matched only before "bpe".
    "fuzzed gpt2": r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]bpe\s++$|\s+(?!\S)|\s""",
    "empty matches": r"x*",
}
TEXTS = ["ab, cd!", " a b ", "!!", "x", "abxxc", "Hello, world! 42 times.", "caf\u00e9 \u65e5\u672c\u8a9e", EOT]


def texts() -> list[str]:
    return TEXTS + HARD_STRINGS + random_strings(2000, seed=7)


@pytest.fixture(scope="module")
def gpt2() -> dict:
    return read_tokenizer(gpt2_ranks.path(), pattern="gpt2", special=[f"{EOT}=50256"])


def test_hf_keeps_the_stretches_as_pieces():
    split = pre_tokenizers.Split(Regex(PATTERNS["letters"]), behavior="isolated")
    assert [piece for piece, _ in split.pre_tokenize_str("ab, cd!")] == ["ab", ", ", "cd", "!"]


@pytest.mark.parametrize("name", list(PATTERNS))
def test_ids_equal_hf_isolated_split_and_round_trip(gpt2, name, tmp_path):
    canonical = {**gpt2, "pattern": PATTERNS[name]}
    inputs = texts()
    # The pattern leaves stretches uncovered in many of the texts (what find_iter alone would lose).
    matched = ["".join(regex.findall(PATTERNS[name], t)) for t in inputs]
    assert sum(m != t for m, t in zip(matched, inputs, strict=True)) > len(inputs) // 4
    hf = to_hf(canonical)
    hf.encode_special_tokens = True  # "<|endoftext|>" in the text is text, as the tool encodes it
    hf_ids = [e.ids for e in hf.encode_batch(inputs, add_special_tokens=False)]
    replies = run_tool(canonical, tmp_path / "tokenizer.json", inputs)

    differ = [t for t, r, want in zip(inputs, replies, hf_ids, strict=True) if r.get("ids") != want]
    assert not differ, f"{len(differ)} of {len(inputs)} differ from HF's isolated split, e.g. {differ[:5]!r}"
    for text, reply in zip(inputs, replies, strict=True):
        assert reply["decoded"] == text
        assert reply["streamed"] == text
