"""Tokenizer description stored in an artifact (tokenizer.json): the canonical form.

Kinds:
- "char": {"kind": "char", "itos": [...]} — a list of characters, id = index,
  as nanoGPT's shakespeare_char meta;
- "bpe": {"kind": "bpe", "pattern", "vocab", "special", "eos"} — byte-level BPE
  in tiktoken's convention: vocab[id] is the base64 of the token's bytes and the
  id is also its merge rank (a lower id merges first); vocab is null at the ids
  of special tokens, which `special` maps from their text, and at ids no token
  has (gaps, as in OpenAI's cl100k_base: no text, never sampled). One form
  whatever the input was (importers/tokenizer_import.py reads those), so the runtime reads
  one thing and a test can rebuild tiktoken's and Hugging Face's encoders from it;
- "none": the runtime takes and returns token ids only.
"""

import base64
import json
from pathlib import Path

import regex

from gpt_aot.text.byte_level import to_chars

EOT = "<|endoftext|>"
DEFAULT_EOS = object()  # bpe_tokenizer's eos: <|endoftext|> when that special exists
# Ids at or above this are refused: no model has that many rows (o200k_base's largest id is 200 018), and the
# canonical form lists every id below the largest.
ID_LIMIT = 2**24

# Split patterns, copied from tiktoken (tiktoken_ext/openai_public.py). GPT-2's original
# 's|'t|...|\s+(?!\S)|\s+ (Hugging Face's ByteLevel regex) splits identically; tiktoken's runs faster.
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|"""
    r"""\s+(?!\S)|\s"""
)
O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
# A possessive interval, X{n,m}+: Hugging Face's regex engine (Oniguruma, Ruby syntax) reads it as (?:X{n,m})+.
POSSESSIVE_INTERVAL = regex.compile(r"(?<!\\)(\{\d+(?:,\d*)?\})\+")
PATTERNS = {"gpt2": GPT2_PATTERN, "r50k_base": GPT2_PATTERN, "cl100k_base": CL100K_PATTERN, "o200k_base": O200K_PATTERN}


def char_tokenizer(meta_path: Path) -> dict:
    meta = json.loads(Path(meta_path).read_text())
    return char_from_meta(meta, meta_path)


def char_from_meta(meta: dict, source) -> dict:
    """nanoGPT char metadata (meta.json's itos list, or meta.pkl's itos dict id -> char)."""
    if not isinstance(meta, dict) or meta.get("kind", "char") != "char":
        raise ValueError(f"{source}: expects a char vocabulary with an 'itos' list")
    itos = meta.get("itos")
    if isinstance(itos, dict):
        if not all(type(i) is int for i in itos) or sorted(itos) != list(range(len(itos))):
            raise ValueError(f"{source}: 'itos' ids are not exactly 0..{len(itos) - 1}")
        itos = [itos[i] for i in range(len(itos))]
    if not isinstance(itos, list) or not all(isinstance(ch, str) for ch in itos):
        raise ValueError(f"{source}: expects a char vocabulary with an 'itos' list")
    return {"kind": "char", "itos": itos}


def no_tokenizer() -> dict:
    return {"kind": "none"}


def bpe_tokenizer(tokens, special, pattern: str, eos=DEFAULT_EOS) -> dict:
    """Validate and build the canonical "bpe" form.

    `tokens`: (bytes, id) pairs of the ordinary tokens, id = rank; `special`:
    (text, id) pairs. Pairs rather than dicts, so that duplicates are seen and
    named. `eos`: a special token's text, None, or DEFAULT_EOS.

    Ids may leave gaps (OpenAI's encodings do: cl100k_base has no id 100256); the
    runtime never samples a gap. Refused: two tokens with one id (a special token's
    id equal to a rank included), one token's bytes twice, a special token whose
    text is an ordinary token's bytes (decoding could not tell the two apart, and
    Hugging Face's vocabulary holds one id per string), negative ids and ids from
    ID_LIMIT up."""
    by_id: dict[int, str] = {}
    seen_bytes: dict[bytes, int] = {}
    entries = {}
    for token, i in tokens:
        if not token:
            raise ValueError(f"token id {i} is empty")
        if token in seen_bytes:
            raise ValueError(f"duplicate token bytes {token!r}: ids {seen_bytes[token]} and {i}")
        seen_bytes[token] = i
        _claim(by_id, i, f"token {token!r}")
        entries[i] = base64.b64encode(token).decode("ascii")
    specials: dict[str, int] = {}
    for text, i in special:
        if not isinstance(text, str) or not text:
            raise ValueError(f"special token id {i} has no text")
        if text in specials:
            raise ValueError(f"duplicate special token {text!r}: ids {specials[text]} and {i}")
        _claim(by_id, i, f"special token {text!r}")
        if text.encode("utf-8") in seen_bytes:
            raise ValueError(
                f"special token {text!r} (id {i}) has the bytes of ordinary token {seen_bytes[text.encode('utf-8')]}: "
                "decoding could not tell them apart"
            )
        specials[text] = i
        entries[i] = None
    if not by_id:
        raise ValueError("the vocabulary is empty")
    n = max(by_id) + 1  # ids below it that no token has are gaps: null, as special tokens' ids are
    for b in range(256):
        if bytes([b]) not in seen_bytes:
            raise ValueError(f"no token for the single byte 0x{b:02x}: text containing it could not be encoded")
    if not isinstance(pattern, str) or not pattern:
        raise ValueError("no split pattern")
    try:
        regex.compile(pattern)
    except regex.error as e:
        raise ValueError(f"split pattern {pattern!r} does not compile: {e}") from None
    if eos is DEFAULT_EOS:
        eos = EOT if EOT in specials else None
    if eos is not None and eos not in specials:
        raise ValueError(f"EOS token {eos!r} is not a special token (specials: {sorted(specials)})")
    return {
        "kind": "bpe",
        "pattern": pattern,
        "vocab": [entries.get(i) for i in range(n)],
        "special": dict(sorted(specials.items(), key=lambda kv: kv[1])),
        "eos": None if eos is None else specials[eos],
    }


def _claim(by_id: dict, i, what: str) -> None:
    if not isinstance(i, int) or isinstance(i, bool):
        raise ValueError(f"{what} has a non-integer id {i!r}")
    if i < 0:
        raise ValueError(f"{what} has a negative id {i}")
    if i >= ID_LIMIT:
        raise ValueError(f"{what} has id {i}, beyond the largest a tokenizer may have ({ID_LIMIT - 1})")
    if i in by_id:
        raise ValueError(f"duplicate id {i}: {by_id[i]} and {what}")
    by_id[i] = what


def vocab_size(tokenizer: dict) -> int | None:
    """Ids the tokenizer can produce: its largest + 1, gaps included (None for "none")."""
    if tokenizer["kind"] == "char":
        return len(tokenizer["itos"])
    if tokenizer["kind"] == "bpe":
        return len(tokenizer["vocab"])
    return None


def check_fits(tokenizer: dict, model_vocab_size: int) -> None:
    """Refuse a tokenizer whose ids the model has no rows for (padding rows do not count)."""
    n = vocab_size(tokenizer)
    if n is not None and n > model_vocab_size:
        raise ValueError(
            f"the tokenizer has {n} tokens but the model's vocab_size is {model_vocab_size}: "
            "every token id needs a row (set vocab_size >= the tokenizer's size)"
        )


def ranks(tokenizer: dict) -> dict[bytes, int]:
    """Ordinary token bytes -> id (= rank) of a "bpe" tokenizer."""
    return {base64.b64decode(t): i for i, t in enumerate(tokenizer["vocab"]) if t is not None}


def to_tiktoken(tokenizer: dict):
    """A tiktoken Encoding with the same ranks, pattern and specials."""
    import tiktoken

    mergeable = ranks(tokenizer)
    n = len(tokenizer["vocab"])
    return tiktoken.Encoding(
        name="gpt_aot",
        pat_str=tokenizer["pattern"],
        mergeable_ranks=mergeable,
        special_tokens=dict(tokenizer["special"]),
        # tiktoken checks a count only of ids without gaps
        explicit_n_vocab=n if len(mergeable) + len(tokenizer["special"]) == n else None,
    )


def bpe_parts(rank_of: dict[bytes, int], token: bytes, max_rank: int) -> list[bytes]:
    """Merge `token`'s bytes by rank using only ranks below `max_rank`: the two
    parts BPE joins into `token` (more than two when no merge reaches it)."""
    parts = [bytes([b]) for b in token]
    while len(parts) > 1:
        best = None
        for j in range(len(parts) - 1):
            r = rank_of.get(parts[j] + parts[j + 1])
            if r is not None and r < max_rank and (best is None or r < best[0]):
                best = (r, j)
        if best is None:
            break
        j = best[1]
        parts[j : j + 2] = [parts[j] + parts[j + 1]]
    return parts


def merges(tokenizer: dict) -> list[tuple[bytes, bytes]]:
    """The merge list that id-as-rank implies, in priority order (as Hugging
    Face's tiktoken converter reconstructs it): for each multi-byte token, the
    two parts that BPE on its own bytes with lower ranks produces."""
    rank_of = ranks(tokenizer)
    out = []
    for token, rank in sorted(rank_of.items(), key=lambda kv: kv[1]):
        if len(token) > 1:
            parts = bpe_parts(rank_of, token, rank)
            if len(parts) == 2:
                out.append((parts[0], parts[1]))
    return out


def to_hf(tokenizer: dict):
    """A Hugging Face tokenizers.Tokenizer (ByteLevel BPE) with the same vocabulary,
    merges reconstructed from the ranks. ignore_merges makes a piece that is a
    token as a whole encode to that token, as tiktoken does."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

    vocab = {to_chars(token): i for token, i in ranks(tokenizer).items()}
    for text, i in tokenizer["special"].items():
        if text in vocab:
            raise ValueError(f"special token {text!r} spells the same as ordinary token {vocab[text]}")
        vocab[text] = i
    pairs = [(to_chars(a), to_chars(b)) for a, b in merges(tokenizer)]
    hf = Tokenizer(models.BPE(vocab=vocab, merges=pairs, ignore_merges=True))
    if tokenizer["pattern"] == GPT2_PATTERN:
        hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        # Oniguruma has no possessive interval; a greedy one splits the same where, as in cl100k's and o200k's
        # \p{N}{1,3}+, the interval ends its alternative.
        pattern = POSSESSIVE_INTERVAL.sub(r"\1", tokenizer["pattern"])
        hf.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
    hf.decoder = decoders.ByteLevel()
    hf.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in tokenizer["special"]])
    return hf


def encode(tokenizer: dict, text: str) -> list[int]:
    """Token ids of `text`; special tokens' texts are plain text here. (A "bpe"
    tokenizer builds its encoder per call: to encode many texts, use to_tiktoken once.)"""
    if tokenizer["kind"] == "bpe":
        return to_tiktoken(tokenizer).encode(text, disallowed_special=())
    if tokenizer["kind"] != "char":
        raise ValueError("this tokenizer has no text encoding")
    stoi = {ch: i for i, ch in enumerate(tokenizer["itos"])}
    return [stoi[ch] for ch in text if ch in stoi]
