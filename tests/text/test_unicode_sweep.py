"""Every assigned code point through the runtime's split pattern (tests/text/tokenizer_tool)
against tiktoken's, in the contexts where the two regex engines could cut differently (issue 41).

tiktoken matches its patterns with Rust's regex crate (tiktoken 0.14: regex-syntax 0.8.11,
Unicode 16.0.0); the runtime with PCRE2 10.42 (Unicode 14.0.0), the pattern translated first
(runtime/text/split_pattern.cpp, unicode_tables.h). Before that translation PCRE2's \\s held
U+180E and its \\p{L}, \\p{N} lacked what Unicode 15 and 16 assigned.

The vocabulary makes the split visible in the ids. Beside the 256 bytes, every pair of bytes
that can meet across a character boundary (a character's last byte, then the next one's first)
is a token, and so is every triple an ASCII character between two others makes in the contexts
below ("a?b", "1?2", " ?b", "? x"). BPE joins bytes only inside one piece, and with these tokens
it joins every character boundary inside a piece: two characters are in one piece exactly when
the ids join their boundary, so a piece cut differently gives different ids.

The code points: every one that Python's unicodedata (Unicode 14.0.0 here) or tiktoken's engine
(asked with \\P{Cn}) has assigned, the BMP's private use area included; the rest are unassigned
for both, in no class the patterns name. Planes 15 and 16 are private use whole (Co in every
version, as the BMP's area): their first and last 256 code points stand for the 131 068. One call
per engine: the texts are joined by a special token, and tiktoken and the runtime split each
segment between special tokens as a whole text of its own (\\s++$ included).
"""

import base64
import json
import subprocess
import sys
import time
import unicodedata
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import tiktoken

from gpt_aot.text.tokenizer import PATTERNS, to_tiktoken

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))

import gpt2_ranks  # noqa: E402
from test_bpe import TOOL  # noqa: E402

SEPARATOR = "<|s|>"
# Each context has a reason: a letter run (\p{L}, o200k's case classes), a number run (\p{N},
# cl100k's \p{N}{1,3}), " ?" before a class and a letter after (\s; U+180E), a whitespace run
# before a word (\s+(?!\S)), one at the end of the text (\s++$), a run of the character itself,
# and a contraction ((?i:'s) also matches U+017F, LATIN SMALL LETTER LONG S).
CONTEXTS = ["a{c}b", "1{c}2", " {c}b", "{c} x", " {c}", "{c}{c}", "'{c}"]
# Patterns beside tiktoken's: \w, \W, \b, \B and \d, which the runtime translates too.
WORDS_PATTERN = r"""\b\w{1,3}|\B\w+|\d+|\s+|\W"""
SWEPT = {"gpt2": PATTERNS["gpt2"], "cl100k_base": PATTERNS["cl100k_base"], "o200k_base": PATTERNS["o200k_base"]}
SWEPT["words"] = WORDS_PATTERN
# Where the runtime knowingly differs (docs/TOKENIZERS.md): a category losing a code point from
# PCRE2's Unicode version to tiktoken's cannot be taken out of PCRE2's property. None of the
# patterns above names such a category.
MN_PATTERN = r"""\p{Mn}+|\P{Mn}+"""  # U+1171E AHOM CONSONANT SIGN MEDIAL RA: Mn in 14.0, Mc in 16.0
CN_PATTERN = r"""\p{Cn}+|\P{Cn}+"""  # what Unicode 15 and 16 assigned is still Cn for PCRE2 10.42

# A character's last byte (ASCII or a continuation byte), and a character's first (ASCII or a lead byte).
LAST_BYTES = range(0x00, 0xC0)
FIRST_BYTES = [*range(0x00, 0x80), *range(0xC2, 0xF5)]


def boundary_tokenizer(pattern: str) -> dict:
    """The canonical form (aot/gpt_aot/text/tokenizer.py) of the vocabulary described at the top."""
    tokens = {bytes([b]): None for b in range(256)}
    tokens.update({bytes([last, first]): None for last in LAST_BYTES for first in FIRST_BYTES})
    tokens.update({bytes([last]) + b" x": None for last in LAST_BYTES})
    for left, right in ("ab", "12", " b"):
        tokens.update({left.encode() + bytes([m]) + right.encode(): None for m in range(0x80)})
    vocab = [base64.b64encode(t).decode() for t in tokens] + [None]
    return {"kind": "bpe", "pattern": pattern, "vocab": vocab, "special": {SEPARATOR: len(tokens)}, "eos": None}


PLANE_PRIVATE_USE = [(0xF0000, 0xFFFFD), (0x100000, 0x10FFFD)]


@pytest.fixture(scope="module")
def code_points() -> list[int]:
    every = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    probe = tiktoken.Encoding(
        name="assigned", pat_str=r"\P{Cn}", mergeable_ranks={bytes([b]): b for b in range(256)}, special_tokens={}
    )
    by_tiktoken = {ord(ch) for ch in probe.decode(probe.encode_ordinary("".join(map(chr, every))))}
    # Unicode 16.0.0 assigns 155 063 code points (controls included) and 137 468 for private use.
    assert len(by_tiktoken) == 155_063 + 137_468, (
        "tiktoken's regex engine is no longer Unicode 16.0.0: rerun scripts/gen_unicode_tables.py (docs/TOKENIZERS.md)"
    )
    by_python = {c for c in every if unicodedata.category(chr(c)) != "Cn"}
    assert 0x1D2C0 in by_tiktoken - by_python, "tiktoken's engine knows Unicode 15's Kaktovik numerals"
    kept = by_python | by_tiktoken
    return sorted(c for c in kept if not any(a + 256 <= c <= b - 256 for a, b in PLANE_PRIVATE_USE))


def runtime_ids(canonical: dict, path: Path, texts: list[str], special: bool) -> list[list[int]]:
    """The runtime's ids of each text (tests/text/tokenizer_tool)."""
    path.write_text(json.dumps(canonical))
    lines = "".join(json.dumps({"text": t, "special": special, "ids_only": True}) + "\n" for t in texts)
    vocab_size = str(len(canonical["vocab"]))
    done = subprocess.run([str(TOOL), str(path), "bpe", vocab_size], input=lines.encode(), capture_output=True)
    assert done.returncode == 0, done.stdout.decode(errors="replace")[:2000] + done.stderr.decode(errors="replace")
    replies = [json.loads(line) for line in done.stdout.decode().split("\n") if line]
    assert len(replies) == len(texts) and all("ids" in r for r in replies), [r for r in replies if "ids" not in r]
    return [r["ids"] for r in replies]


def name(c: int) -> str:
    return f"U+{c:04X} {unicodedata.name(chr(c), f'(not in Unicode {unicodedata.unidata_version})')}"


def differing(pattern: str, contexts: list[str], code_points: list[int], tmp_path: Path) -> dict[int, list[str]]:
    """Code point -> the contexts in which the runtime's ids differ from tiktoken's."""
    canonical = boundary_tokenizer(pattern)
    encoding = to_tiktoken(canonical)
    separator = canonical["special"][SEPARATOR]
    texts = [SEPARATOR.join(context.replace("{c}", chr(c)) for c in code_points) for context in contexts]
    with ThreadPoolExecutor(1) as pool:  # the runtime's process and tiktoken side by side
        runtime = pool.submit(runtime_ids, canonical, tmp_path / "tokenizer.json", texts, True)
        want = encoding.encode_batch(texts, allowed_special="all", num_threads=1)
        got = runtime.result()
    out: dict[int, list[str]] = {}
    for context, ids, expected in zip(contexts, got, want, strict=True):
        if ids == expected:
            continue
        got_units, want_units = split_at(ids, separator), split_at(expected, separator)
        assert len(got_units) == len(want_units) == len(code_points)
        for c, got, wanted in zip(code_points, got_units, want_units, strict=True):
            if got != wanted:
                out.setdefault(c, []).append(context)
    return out


def split_at(ids: list[int], separator: int) -> list[list[int]]:
    units: list[list[int]] = [[]]
    for i in ids:
        if i == separator:
            units.append([])
        else:
            units[-1].append(i)
    return units


def describe(diff: dict[int, list[str]]) -> str:
    shown = [f"{name(c)} in {contexts}" for c, contexts in list(diff.items())[:8]]
    return f"{len(diff)} code points differ from tiktoken, e.g. " + "; ".join(shown)


@pytest.mark.parametrize("pattern", list(SWEPT))
def test_every_code_point_splits_as_tiktoken_does(pattern, code_points, tmp_path):
    started = time.monotonic()
    diff = differing(SWEPT[pattern], CONTEXTS, code_points, tmp_path)
    assert not diff, describe(diff)
    print(f"{pattern}: {len(code_points)} code points x {len(CONTEXTS)} contexts in {time.monotonic() - started:.1f} s")


def test_the_documented_exceptions_are_the_only_differences(code_points, tmp_path):
    """docs/TOKENIZERS.md: \\p{Mn} keeps U+1171E, \\p{Cn} keeps what Unicode 15 and 16 assigned."""
    assert unicodedata.unidata_version == "14.0.0", "Python's Unicode is PCRE2's here: its Cn is PCRE2's"
    assert set(differing(MN_PATTERN, ["a{c}b"], code_points, tmp_path)) == {0x1171E}
    assigned_since = {c for c in code_points if unicodedata.category(chr(c)) == "Cn"}
    assert len(assigned_since) == 10_301  # Unicode 15.0, 15.1 and 16.0's new characters
    assert set(differing(CN_PATTERN, ["a{c}b"], code_points, tmp_path)) == assigned_since


def test_mongolian_vowel_separator_is_not_whitespace(tmp_path):
    # Issue 41's case: U+180E left White_Space in Unicode 6.3; PCRE2's \s still held it.
    # GPT-2's ranks (r50k_base), one "base64 rank" line each in rank order, as the canonical form lists them.
    lines = [line.split() for line in gpt2_ranks.path().read_text().splitlines() if line]
    assert [int(rank) for _, rank in lines] == list(range(50256))
    gpt2 = {"kind": "bpe", "pattern": PATTERNS["gpt2"], "vocab": [b64 for b64, _ in lines] + [None]}
    gpt2 |= {"special": {"<|endoftext|>": 50256}, "eos": 50256}
    text = " \u180eb"
    assert runtime_ids(gpt2, tmp_path / "gpt2.json", [text], False) == [[28053, 254, 236, 65]]
    assert to_tiktoken(gpt2).encode_ordinary(text) == [28053, 254, 236, 65]


@pytest.mark.parametrize("pattern", ["gpt2", "cl100k_base"])
def test_kaktovik_numerals_and_u180e(pattern, tmp_path):
    # Unicode 15's Kaktovik numerals (No) are \p{N} for tiktoken; PCRE2 10.42 knows none of them.
    kaktovik = list(range(0x1D2C0, 0x1D2D4))
    diff = differing(PATTERNS[pattern], CONTEXTS, [*kaktovik, 0x180E], tmp_path)
    assert not diff, describe(diff)
