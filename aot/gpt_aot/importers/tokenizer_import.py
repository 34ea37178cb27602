"""Read the tokenizer files people have into the canonical form (text/tokenizer.py).

`gpt_aot compile --tokenizer PATH` takes any of these, recognised by content
(a file's name alone may lie: GPT-2's vocab.json ships as encoder.json too):
- nanoGPT char metadata: meta.json, or meta.pkl through safe_pickle (plain data only);
- GPT-2/OpenAI layout: vocab.json (encoder.json) + merges.txt (vocab.bpe);
- a Hugging Face tokenizer.json with a BPE model and the ByteLevel pre-tokenizer;
- a tiktoken rank file (base64 token, rank per line) with its pattern and specials given apart;
- a dataset directory or meta.json from `prepare-data --tokenizer bpe:N`, or a
  canonical "bpe" tokenizer.json taken from an artifact.

The merge-list formats rank merges by their position; the canonical form ranks
them by token id (tiktoken's convention). The two agree only when merge results
have increasing ids, which is checked here, not assumed.
"""

import base64
import binascii
import json
from pathlib import Path

from gpt_aot.importers import safe_pickle
from gpt_aot.text.byte_level import to_bytes
from gpt_aot.text.tokenizer import (
    DEFAULT_EOS,
    GPT2_PATTERN,
    PATTERNS,
    POSSESSIVE_INTERVAL,
    bpe_tokenizer,
    char_from_meta,
)

VOCAB_NAMES = ("vocab.json", "encoder.json")
MERGES_NAMES = ("merges.txt", "vocab.bpe")


def read_tokenizer(path, pattern: str | None = None, special=(), eos=DEFAULT_EOS) -> dict:
    """The canonical form of the tokenizer at `path` (file or directory).

    `pattern` (a regex or a name in tokenizer.PATTERNS) and `special`
    ("TOKEN=ID" strings) describe a tiktoken rank file, which holds neither;
    `eos` (a special token's text, None, or DEFAULT_EOS) applies to every BPE input."""
    path = Path(path)
    source = _locate(path) if path.is_dir() else path
    tiktoken_opts = pattern is not None or bool(special)
    data = source.read_bytes()
    if data[:1] == b"\x80":  # pickle protocol 2 and later
        _only_bpe_options(source, tiktoken_opts, "a nanoGPT meta.pkl")
        _no_eos(source, eos, "a nanoGPT meta.pkl")
        return char_from_meta(safe_pickle.load_plain(source), source)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{source}: not a tokenizer file (neither UTF-8 text nor a pickle)") from None
    try:
        obj = json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError:
        obj = None
    except ValueError as e:
        raise ValueError(f"{source}: {e}") from None
    if obj is not None:
        return _read_json(source, obj, tiktoken_opts, pattern, special, eos)
    first = next((line for line in text.splitlines() if line.strip()), "")
    fields = first.split()
    if len(fields) == 2 and fields[1].isdigit() and _is_base64(fields[0]):
        return read_tiktoken(source, pattern, special, eos)
    if first.startswith("#version") or len(fields) == 2:
        _only_bpe_options(source, tiktoken_opts, "a GPT-2 merges file")
        return read_gpt2(_beside(source, VOCAB_NAMES, "vocab.json"), source, eos)
    raise ValueError(
        f"{source}: unrecognised tokenizer file: expected meta.json/meta.pkl, vocab.json + merges.txt, "
        "a Hugging Face tokenizer.json or a .tiktoken rank file"
    )


def _locate(directory: Path) -> Path:
    """The file to read in a directory: tokenizer.json, the GPT-2 pair, meta.json, meta.pkl or one .tiktoken."""
    for name in ("tokenizer.json", *VOCAB_NAMES, "meta.json", "meta.pkl"):
        if (directory / name).is_file():
            return directory / name
    ranks = sorted(directory.glob("*.tiktoken"))
    if len(ranks) == 1:
        return ranks[0]
    raise ValueError(
        f"{directory}: no tokenizer found "
        "(tokenizer.json, vocab.json + merges.txt, meta.json, meta.pkl or one .tiktoken)"
    )


def _beside(path: Path, names, what: str) -> Path:
    for name in names:
        if (path.parent / name).is_file():
            return path.parent / name
    raise ValueError(f"{path}: needs its {what} beside it ({' or '.join(names)} in {path.parent})")


def _unique_keys(pairs):
    out = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r} in a JSON object (a token listed twice?)")
        out[key] = value
    return out


def _is_base64(text: str) -> bool:
    try:
        base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _only_bpe_options(source: Path, tiktoken_opts: bool, what: str) -> None:
    if tiktoken_opts:
        raise ValueError(f"{source} is {what}: --bpe-pattern and --special apply to a .tiktoken rank file only")


def _no_eos(source: Path, eos, what: str) -> None:
    if eos is not DEFAULT_EOS:
        raise ValueError(f"{source} is {what}: --eos applies to BPE tokenizers only")


def _read_json(source: Path, obj, tiktoken_opts: bool, pattern, special, eos) -> dict:
    # By content: GPT-2's vocab.json maps every token to an int, its own key "model" included; a Hugging Face
    # tokenizer.json's "model" is an object.
    if isinstance(obj, dict) and isinstance(obj.get("model"), dict):
        _only_bpe_options(source, tiktoken_opts, "a Hugging Face tokenizer.json")
        return read_hf(source, obj, eos)
    if isinstance(obj, dict) and obj.get("kind") == "bpe" and isinstance(obj.get("vocab"), list):
        _only_bpe_options(source, tiktoken_opts, "a canonical bpe tokenizer")
        return read_canonical(source, obj, eos)
    if isinstance(obj, dict) and obj.get("kind") == "bpe" and isinstance(obj.get("tokenizer"), str):
        target = source.parent / obj["tokenizer"]  # prepare-data's meta.json names its tokenizer file
        if target.resolve() == source.resolve():
            raise ValueError(f"{source}: names itself as its tokenizer")
        return read_tokenizer(target, pattern, special, eos)
    if isinstance(obj, dict) and "itos" in obj:
        _only_bpe_options(source, tiktoken_opts, "a nanoGPT meta.json")
        _no_eos(source, eos, "a nanoGPT meta.json")
        return char_from_meta(obj, source)
    if isinstance(obj, dict) and obj and all(isinstance(v, int) for v in obj.values()):
        _only_bpe_options(source, tiktoken_opts, "a GPT-2 vocab.json")
        return read_gpt2(source, _beside(source, MERGES_NAMES, "merges.txt"), eos, vocab=obj)
    raise ValueError(f"{source}: unrecognised JSON: not a char meta.json, GPT-2 vocab.json or HF tokenizer.json")


def read_gpt2(vocab_path: Path, merges_path: Path, eos=DEFAULT_EOS, vocab: dict | None = None) -> dict:
    """GPT-2's vocab.json (byte-level string -> id) + merges.txt ("a b" per line, maybe a #version line first)."""
    if vocab is None:
        vocab = json.loads(Path(vocab_path).read_text(encoding="utf-8"), object_pairs_hook=_unique_keys)
    merges = []
    for number, line in enumerate(Path(merges_path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or (number == 1 and line.startswith("#version")):
            continue
        parts = line.split(" ")
        if len(parts) != 2 or not all(parts):
            raise ValueError(f"{merges_path} line {number}: {line!r} is not two tokens separated by one space")
        merges.append((parts[0], parts[1], f"{merges_path.name} line {number}"))
    return from_merges(vocab, merges, {}, GPT2_PATTERN, eos, vocab_path)


def read_hf(source: Path, obj: dict, eos=DEFAULT_EOS) -> dict:
    """A Hugging Face tokenizer.json: BPE model, ByteLevel pre-tokenizer (alone, in a
    Sequence, or after a Split that then carries the pattern), nothing that changes encoding."""
    model = obj.get("model") or {}
    kind = model.get("type", "BPE" if "merges" in model else None)
    if kind != "BPE":
        raise ValueError(f"{source}: model type {kind!r} is not supported: only BPE with the ByteLevel pre-tokenizer")
    if model.get("dropout"):
        raise ValueError(f"{source}: BPE dropout {model['dropout']} makes encoding random: not supported")
    for key in ("continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(key):
            raise ValueError(f"{source}: BPE {key} {model[key]!r} is not byte-level BPE: not supported")
    normalizer = obj.get("normalizer")
    if normalizer is not None:
        raise ValueError(f"{source}: normalizer {normalizer.get('type')!r} changes the text: not supported")
    _check_post_processor(source, obj.get("post_processor"))
    pattern = _hf_pattern(source, obj.get("pre_tokenizer"))
    merges = []
    for number, merge in enumerate(model.get("merges") or []):
        parts = merge.split(" ") if isinstance(merge, str) else merge
        if not isinstance(parts, list) or len(parts) != 2 or not all(isinstance(p, str) and p for p in parts):
            raise ValueError(f"{source}: merge {number} {merge!r} is not a pair of tokens")
        merges.append((parts[0], parts[1], f"{source.name} merge {number}"))
    vocab = model.get("vocab") or {}
    special = {}
    for added in obj.get("added_tokens") or []:
        # HF matches added tokens in the text before BPE runs; one that is not a BPE token is a special token here.
        if added.get("special") or added.get("content") not in vocab:
            if added.get("content") in special:
                raise ValueError(f"{source}: added token {added['content']!r} is listed twice")
            special[added.get("content")] = added.get("id")
    return from_merges(vocab, merges, special, pattern, eos, source)


def _check_post_processor(source: Path, post) -> None:
    """Refuses a post-processor that adds tokens to the encoded text (the runtime encodes a prompt as its own tokens
    only). Those that add none pass: ByteLevel (offsets only), a TemplateProcessing whose templates hold the
    sequences alone (what transformers 5.x's save_pretrained writes for GPT-2), and a Sequence of such."""
    if post is None:
        return
    kind = post.get("type") if isinstance(post, dict) else None
    if kind == "ByteLevel":
        return
    if kind == "Sequence":
        for step in post.get("processors") or []:
            _check_post_processor(source, step)
        return
    if kind == "TemplateProcessing":
        for template, what in (("single", "every text"), ("pair", "a pair of texts")):
            pieces = post.get(template) or []
            added = [p["SpecialToken"] for p in pieces if isinstance(p, dict) and "SpecialToken" in p]
            added = [a.get("id") if isinstance(a, dict) else a for a in added]
            if added or not all(isinstance(p, dict) and set(p) == {"Sequence"} for p in pieces):
                shown = ", ".join(str(a) for a in added) or json.dumps(pieces)
                raise ValueError(
                    f"{source}: post-processor TemplateProcessing adds {shown} to {what}: not supported (the "
                    "runtime encodes text as its own tokens only; a template of $A / $B alone is accepted)"
                )
        return
    if kind in ("BertProcessing", "RobertaProcessing"):
        raise ValueError(f"{source}: post-processor {kind} adds tokens: not supported")
    raise ValueError(
        f"{source}: post-processor {kind!r} is not supported: only ones that add no token "
        "(ByteLevel, TemplateProcessing of the sequences alone, a Sequence of those)"
    )


def _hf_pattern(source: Path, pre) -> str:
    steps = pre.get("pretokenizers", []) if pre and pre.get("type") == "Sequence" else [pre]
    names = [s.get("type") if s else None for s in steps]
    if names == ["ByteLevel"]:
        level = steps[0]
        if not level.get("use_regex", True):
            raise ValueError(f"{source}: ByteLevel with use_regex false and no Split: the text is never split")
    elif names == ["Split", "ByteLevel"]:
        split, level = steps
        if level.get("use_regex", True):
            raise ValueError(f"{source}: a Split before ByteLevel with use_regex true splits twice: not supported")
        if split.get("behavior") != "Isolated" or split.get("invert"):
            raise ValueError(f"{source}: Split behavior {split.get('behavior')!r} (invert {split.get('invert')})")
        if "Regex" not in (split.get("pattern") or {}):
            raise ValueError(f"{source}: Split by a plain string is not supported, only a regex")
    else:
        shown = " + ".join(str(n) for n in names)
        raise ValueError(f"{source}: pre-tokenizer {shown} is not supported: byte-level BPE needs ByteLevel")
    if level.get("add_prefix_space"):
        raise ValueError(f"{source}: ByteLevel add_prefix_space true (a space before the text) is not supported")
    if names == ["ByteLevel"]:
        return GPT2_PATTERN
    pattern = split["pattern"]["Regex"]
    if POSSESSIVE_INTERVAL.search(pattern):
        raise ValueError(
            f"{source}: Split pattern {pattern!r} has an interval followed by '+', which Hugging Face's regex engine "
            "reads as a repeated interval and tiktoken (the canonical encoder) as possessive: encodings would differ"
        )
    return pattern


def from_merges(vocab: dict, merges, special: dict, pattern: str, eos, source) -> dict:
    """Canonical form of a vocabulary (byte-level string -> id) and merge list
    [(a, b, where)]: checks every merge, that merge results' ids increase in merge
    order (so id-as-rank keeps the merge priority), and takes an entry that is
    neither a single byte nor a merge result as a special token (GPT-2's
    vocab.json lists <|endoftext|> that way)."""
    for key, i in vocab.items():
        if not isinstance(i, int) or isinstance(i, bool):
            raise ValueError(f"{source}: token {key!r} has a non-integer id {i!r}")
    results = set()
    previous = None
    for a, b, where in merges:
        for part in (a, b):
            if part not in vocab:
                raise ValueError(f"{where}: merge {a!r} + {b!r} references unknown token {part!r}")
            if to_bytes(part) is None:
                raise ValueError(f"{where}: token {part!r} is not spelled in GPT-2's byte-level alphabet")
        if a + b not in vocab:
            raise ValueError(f"{where}: merge {a!r} + {b!r}: the result {a + b!r} is not in the vocabulary")
        i = vocab[a + b]
        if previous is not None and i <= previous[0]:
            raise ValueError(
                f"{where}: merge {a!r} + {b!r} gives id {i}, not above id {previous[0]} of the merge before it "
                f"({previous[1]}): ids must increase in merge order to serve as BPE ranks"
            )
        previous = (i, where)
        results.add(a + b)
    tokens, specials = [], dict(special)
    for key, i in vocab.items():
        if key in special:
            if special[key] != i:
                raise ValueError(f"{source}: special token {key!r} has id {special[key]} and vocabulary id {i}")
            continue
        spelled = to_bytes(key)
        if key in results or (spelled is not None and len(spelled) == 1):
            tokens.append((spelled, i))
        else:
            specials[key] = i
    return _canonical(tokens, specials.items(), pattern, eos, source)


def read_tiktoken(path: Path, pattern: str | None, special=(), eos=DEFAULT_EOS) -> dict:
    """A tiktoken rank file: "base64(token) rank" per line. Pattern and specials come from the caller."""
    if pattern is None:
        raise ValueError(
            f"{path} is a tiktoken rank file: give its split pattern with --bpe-pattern "
            f"({', '.join(PATTERNS)} or a regex)"
        )
    tokens = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split()
        try:
            if len(fields) != 2:
                raise ValueError
            tokens.append((base64.b64decode(fields[0], validate=True), int(fields[1])))
        except (ValueError, binascii.Error):
            raise ValueError(f"{path} line {number}: {line[:80]!r} is not 'base64-token rank'") from None
    return _canonical(tokens, parse_special(special), PATTERNS.get(pattern, pattern), eos, path)


def parse_special(items) -> list[tuple[str, int]]:
    """--special TOKEN=ID arguments (the id follows the last '=')."""
    out = []
    for item in items:
        text, sep, i = item.rpartition("=")
        if not sep or not text or not i.strip().isdigit():
            raise ValueError(f"--special {item!r} is not TOKEN=ID")
        out.append((text, int(i)))
    return out


def read_canonical(source: Path, obj: dict, eos=DEFAULT_EOS) -> dict:
    """A canonical "bpe" tokenizer.json (e.g. an artifact's), validated again."""
    tokens = []
    for i, t in enumerate(obj["vocab"]):
        if t is not None:
            try:
                tokens.append((base64.b64decode(t, validate=True), i))
            except (binascii.Error, TypeError):
                raise ValueError(f"{source}: vocab entry {i} {t!r} is not base64") from None
    special = obj.get("special") or {}
    if eos is DEFAULT_EOS:
        by_id = {i: text for text, i in special.items()}
        eos = by_id.get(obj.get("eos"))
        if obj.get("eos") is not None and eos is None:
            raise ValueError(f"{source}: eos id {obj['eos']} is not a special token")
    return _canonical(tokens, special.items(), obj.get("pattern", ""), eos, source)


def _canonical(tokens, special, pattern, eos, source) -> dict:
    try:
        return bpe_tokenizer(tokens, special, pattern, eos)
    except ValueError as e:
        raise ValueError(f"{source}: {e}") from None
