"""Tokenizer inputs -> the canonical form, checked against tiktoken and Hugging Face tokenizers."""

import ast
import base64
import json
import os
import pickle
import random
from pathlib import Path

import numpy as np
import pytest
import tiktoken
import tiktoken_ext.openai_public
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from gpt_aot.__main__ import main
from gpt_aot.importers.safe_pickle import load_plain
from gpt_aot.importers.tokenizer_import import read_tokenizer
from gpt_aot.text import bpe_data, tokenizer
from gpt_aot.text.byte_level import to_bytes, to_chars

EOT = "<|endoftext|>"
TRAINED = 500  # tokens of the trained test tokenizer (the corpus has room for ~530)
WORDS = (
    "the of and to in that he shall unto for his a lord they be is him not them it with all thou was god which my "
    "me said but ye their have will thee from as are when this out were upon man by you king Israel people 1234 "
    "don't I'll we've she's THEY'RE it'd café naïve Straße 東京 日本語 مرحبا שלום Привет 😀 👍🏽 … — “quoted”"
).split()

HARD = [
    "",
    " ",
    "  ",
    "\n",
    "\n\n",
    " \n \n",
    "\t\t x",
    "a  b   c    d",
    "trailing spaces   ",
    "   leading spaces",
    "line one\nline two\r\nline three\r",
    "don't DON'T I'm I'M you're YOU'RE we've WE'VE he'll HE'LL she'd SHE'D it's IT'S",
    "'s 's's ''s",
    "1234567890 12 345 6789",
    "٣٤٥ ४५६ ໑໒ ８９",
    "東京は日本の首都です。",
    "中文字符测试",
    "مرحبا بالعالم",
    "שלום עולם",
    "Привет, мир!",
    "e\u0301 a\u0308 n\u0303 combining",
    "👨‍👩‍👧‍👦 family, 👍🏽 thumbs, 🏳️‍🌈 flag",
    "ﬁ ﬂ ﬀ ligatures",
    "\x00\x01\x07\x1b[31mred\x1b[0m\x7f",
    "\u200b\u200c\u200d zero widths \ufeff",
    "\u3000ideographic space\u00a0nbsp\u2028line sep",
    "a" * 300,
    "supercalifragilisticexpialidocious" * 5,
    "<|endoftext|> is text here",
    "In the beginning God created the heaven and the earth.",
    "!!!??? ... ,,, ;;; --- ___ *** ### $$$ %%%",
    "http://example.com/path?query=1&x=y#frag",
    "x = f(y) + g[z] * {w: 1}",
    "    indented code\n        more\n",
    "MiXeD CaSe WoRdS",
    " 's",
    "\r\n\r\n",
    "tab\tseparated\tvalues",
]


def corpus(seed: int = 0, words: int = 12_000) -> str:
    rng = random.Random(seed)
    out = []
    for _ in range(words):
        out.append(rng.choice(WORDS))
        out.append(rng.choice([" ", " ", " ", " ", ", ", ".\n", "  ", "\n\n", "; "]))
    return "".join(out)


def random_strings(n: int, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    ranges = [(0x20, 0x7E), (0x0, 0x20), (0xA0, 0x2FF), (0x370, 0x6FF), (0x3040, 0x30FF), (0x4E00, 0x4FFF)]
    ranges += [(0x1F300, 0x1F6FF), (0x2000, 0x206F), (0xE000, 0xE0FF), (0x10000, 0x1007F)]
    out = []
    for _ in range(n):
        chars = []
        for _ in range(rng.randint(0, 30)):
            lo, hi = rng.choice(ranges)
            chars.append(chr(rng.randint(lo, hi)))
        out.append("".join(chars))
    return out


def train_hf(text: str, n: int, pre_tokenizer=None) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizer or pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = trainers.BpeTrainer(
        vocab_size=n, special_tokens=[EOT], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tok.train_from_iterator(text.splitlines(keepends=True), trainer)
    return tok


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One trained BPE saved three ways: tokenizer.json, vocab.json + merges.txt, and a .tiktoken rank file."""
    d = tmp_path_factory.mktemp("bpe")
    tok = train_hf(corpus(), TRAINED)
    tok.save(str(d / "tokenizer.json"))
    (d / "gpt2").mkdir()
    tok.model.save(str(d / "gpt2"))
    vocab = tok.get_vocab()
    ranks = sorted((i, to_bytes(k)) for k, i in vocab.items() if k != EOT)  # tiktoken's dump_tiktoken_bpe format
    (d / "ranks.tiktoken").write_bytes(b"".join(base64.b64encode(t) + b" %d\n" % i for i, t in ranks))
    return d, tok


def texts() -> list[str]:
    return HARD + corpus(seed=5, words=400).splitlines(keepends=True) + random_strings(200)


def test_patterns_are_tiktokens_own():
    source = Path(tiktoken_ext.openai_public.__file__).read_text()
    found = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and node.name in ("cl100k_base", "o200k_base"):
            for sub in ast.walk(node):
                if isinstance(sub, ast.Dict):
                    for k, v in zip(sub.keys, sub.values, strict=True):
                        if isinstance(k, ast.Constant) and k.value == "pat_str" and isinstance(v, ast.Constant):
                            found[node.name] = v.value
                if isinstance(sub, ast.Assign) and getattr(sub.targets[0], "id", None) == "pat_str":
                    found[node.name] = "|".join(ast.literal_eval(sub.value.args[0]))
    assert tokenizer.PATTERNS["gpt2"] == tokenizer.PATTERNS["r50k_base"] == tiktoken_ext.openai_public.r50k_pat_str
    assert tokenizer.PATTERNS["cl100k_base"] == found["cl100k_base"]
    assert tokenizer.PATTERNS["o200k_base"] == found["o200k_base"]


def test_three_formats_give_one_canonical_form(trained):
    d, _ = trained
    from_hf = read_tokenizer(d / "tokenizer.json")
    from_gpt2 = read_tokenizer(d / "gpt2")  # the directory: vocab.json + merges.txt
    from_vocab_path = read_tokenizer(d / "gpt2" / "vocab.json")
    from_tiktoken = read_tokenizer(d / "ranks.tiktoken", "gpt2", [f"{EOT}=0"])
    assert from_hf == from_gpt2 == from_vocab_path == from_tiktoken
    assert set(from_hf) == {"kind", "pattern", "vocab", "special", "eos"}
    assert from_hf["kind"] == "bpe" and from_hf["pattern"] == tokenizer.GPT2_PATTERN
    assert len(from_hf["vocab"]) == TRAINED and from_hf["special"] == {EOT: 0} and from_hf["eos"] == 0
    assert from_hf["vocab"][0] is None and all(isinstance(t, str) for t in from_hf["vocab"][1:])
    assert read_tokenizer(d / "ranks.tiktoken", "gpt2", [f"{EOT}=0"], eos=None)["eos"] is None


def test_canonical_encoders_match_the_original_hf_tokenizer(trained):
    d, _ = trained
    canonical = read_tokenizer(d / "tokenizer.json")
    original = Tokenizer.from_file(str(d / "tokenizer.json"))
    original.encode_special_tokens = True  # special tokens' texts are text, as tiktoken's disallowed_special=()
    rebuilt = tokenizer.to_hf(canonical)
    rebuilt.encode_special_tokens = True
    enc = tokenizer.to_tiktoken(canonical)
    cases = texts()
    assert len(cases) >= 300
    mismatched = []
    for text in cases:
        ids = enc.encode(text, disallowed_special=())
        if not (ids == original.encode(text).ids == rebuilt.encode(text).ids == tokenizer.encode(canonical, text)):
            mismatched.append(text)
        assert enc.decode_bytes(ids) == text.encode("utf-8")
    assert not mismatched
    assert enc.encode(EOT, allowed_special="all") == [0]


def test_reconstructed_merges_are_the_trained_ones(trained):
    d, _ = trained
    trained_merges = json.loads((d / "tokenizer.json").read_text())["model"]["merges"]
    trained_merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in trained_merges]
    canonical = read_tokenizer(d / "tokenizer.json")
    assert [(to_chars(a), to_chars(b)) for a, b in tokenizer.merges(canonical)] == trained_merges


def test_hf_merges_as_strings_or_pairs_read_the_same(trained, tmp_path):
    d, _ = trained
    obj = json.loads((d / "tokenizer.json").read_text())
    merges = obj["model"]["merges"]
    flip = [m.split(" ") if isinstance(m, str) else " ".join(m) for m in merges]
    obj["model"]["merges"] = flip
    (tmp_path / "tokenizer.json").write_text(json.dumps(obj))
    assert read_tokenizer(tmp_path / "tokenizer.json") == read_tokenizer(d / "tokenizer.json")


# -- small hand-made GPT-2 layouts for the refusals --------------------------------------------------------------


def byte_vocab() -> dict[str, int]:
    return {to_chars(bytes([b])): b for b in range(256)}


def gpt2_layout(tmp_path: Path, extra: dict, merges: list[str]) -> Path:
    vocab = {**byte_vocab(), **extra}
    (tmp_path / "vocab.json").write_text(json.dumps(vocab))
    (tmp_path / "merges.txt").write_text("#version: 0.2\n" + "".join(m + "\n" for m in merges))
    return tmp_path / "vocab.json"


def test_gpt2_layout_takes_a_vocab_entry_without_merge_as_special(tmp_path):
    path = gpt2_layout(tmp_path, {"Ġt": 256, "Ġth": 257, EOT: 258}, ["Ġ t", "Ġt h"])
    c = read_tokenizer(path)
    assert c["special"] == {EOT: 258} and c["eos"] == 258 and c["vocab"][258] is None
    assert base64.b64decode(c["vocab"][257]) == b" th"
    assert tokenizer.to_tiktoken(c).encode(" the") == [257, ord("e")]
    assert read_tokenizer(tmp_path / "merges.txt") == c  # the merges path finds its vocab.json


def test_encoder_json_and_vocab_bpe_names(tmp_path):
    gpt2_layout(tmp_path, {"Ġt": 256, EOT: 257}, ["Ġ t"])
    (tmp_path / "vocab.json").rename(tmp_path / "encoder.json")
    (tmp_path / "merges.txt").rename(tmp_path / "vocab.bpe")
    assert read_tokenizer(tmp_path)["special"] == {EOT: 257}


@pytest.mark.parametrize(
    "extra, merges, message",
    [
        ({"Ġt": 256}, ["Ġ zz"], r"merges.txt line 2: merge 'Ġ' \+ 'zz' references unknown token 'zz'"),
        ({"Ġt": 256}, ["Ġ t", "a b"], r"merges.txt line 3: merge 'a' \+ 'b': the result 'ab' is not in the vocab"),
        ({"Ġt": 256, EOT: 256}, ["Ġ t"], r"duplicate id 256"),
        ({"Ġt": 257, "Ġth": 256}, ["Ġ t", "Ġt h"], r"line 3: .* gives id 256, not above id 257 .*merge order"),
    ],
    ids=["unknown-token", "result-missing", "duplicate-id", "merge-order"],
)
def test_bad_gpt2_layouts_are_refused_by_name(tmp_path, extra, merges, message):
    with pytest.raises(ValueError, match=message):
        read_tokenizer(gpt2_layout(tmp_path, extra, merges))


def test_a_token_listed_twice_in_vocab_json_is_refused(tmp_path):
    path = gpt2_layout(tmp_path, {"Ġt": 256}, ["Ġ t"])
    path.write_text(path.read_text()[:-1] + ', "Ġt": 257}')
    with pytest.raises(ValueError, match=r"duplicate key 'Ġt'"):
        read_tokenizer(path)


def write_ranks(path: Path, tokens: list[bytes]) -> Path:
    path.write_text("".join(f"{base64.b64encode(t).decode()} {i}\n" for i, t in enumerate(tokens)))
    return path


def test_tiktoken_refusals(tmp_path):
    single = [bytes([b]) for b in range(256)]
    path = write_ranks(tmp_path / "dup.tiktoken", [*single, b"ab", b"ab"])
    with pytest.raises(ValueError, match=r"duplicate token bytes b'ab': ids 256 and 257"):
        read_tokenizer(path, "gpt2")
    path = write_ranks(tmp_path / "missing.tiktoken", [*single[1:], b"ab"])
    with pytest.raises(ValueError, match=r"no token for the single byte 0x00"):
        read_tokenizer(path, "gpt2")
    path = write_ranks(tmp_path / "ok.tiktoken", [*single, b"ab"])
    with pytest.raises(ValueError, match=r"--bpe-pattern"):
        read_tokenizer(path)
    with pytest.raises(ValueError, match=r"duplicate id 256: token b'ab' and special token '<\|endoftext\|>'"):
        read_tokenizer(path, "gpt2", [f"{EOT}=256"])
    with pytest.raises(ValueError, match=r"EOS token '<\|end\|>' is not a special token"):
        read_tokenizer(path, "gpt2", [f"{EOT}=257"], eos="<|end|>")
    with pytest.raises(ValueError, match=r"split pattern .* does not compile"):
        read_tokenizer(path, "(unclosed", [f"{EOT}=257"])
    c = read_tokenizer(path, "cl100k_base", [f"{EOT}=257"])
    assert c["pattern"] == tokenizer.CL100K_PATTERN and c["eos"] == 257
    path.write_text(path.read_text() + "not-base64! 258\n")
    with pytest.raises(ValueError, match=r"line 258: .* is not 'base64-token rank'"):
        read_tokenizer(path, "gpt2")


def hf_json(tmp_path: Path, tok: Tokenizer) -> Path:
    tok.save(str(tmp_path / "tokenizer.json"))
    return tmp_path / "tokenizer.json"


@pytest.mark.parametrize(
    "model, name",
    [
        (models.WordPiece({"[UNK]": 0, "a": 1}, unk_token="[UNK]"), "WordPiece"),
        (models.Unigram([("a", -1.0), ("b", -2.0)], 0, False), "Unigram"),
        (models.WordLevel({"[UNK]": 0, "a": 1}, unk_token="[UNK]"), "WordLevel"),
    ],
)
def test_non_bpe_tokenizer_json_is_refused_naming_the_model(tmp_path, model, name):
    with pytest.raises(ValueError, match=rf"model type '{name}' is not supported"):
        read_tokenizer(hf_json(tmp_path, Tokenizer(model)))


def test_hf_pre_tokenizers_that_change_encoding_are_refused(trained, tmp_path):
    _, tok = trained
    other = Tokenizer.from_str(tok.to_str())
    other.pre_tokenizer = pre_tokenizers.Whitespace()
    with pytest.raises(ValueError, match=r"pre-tokenizer Whitespace is not supported"):
        read_tokenizer(hf_json(tmp_path, other))
    other.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    with pytest.raises(ValueError, match=r"add_prefix_space true"):
        read_tokenizer(hf_json(tmp_path, other))
    other.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.ByteLevel(add_prefix_space=False)])
    assert read_tokenizer(hf_json(tmp_path, other)) == read_tokenizer(hf_json(tmp_path, tok))


def split_bytelevel(pattern: str):
    from tokenizers import Regex

    return pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(pattern), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )


def test_split_then_bytelevel_carries_its_own_pattern(tmp_path):
    # cl100k's pattern as Hugging Face files spell it: \p{N}{1,3} without the possessive '+' (see the next test)
    pattern = tokenizer.CL100K_PATTERN.replace("{1,3}+", "{1,3}")
    tok = train_hf(corpus(seed=2), 450, split_bytelevel(pattern))
    tok.encode_special_tokens = True
    c = read_tokenizer(hf_json(tmp_path, tok))
    assert c["pattern"] == pattern and len(c["vocab"]) == 450
    enc, rebuilt = tokenizer.to_tiktoken(c), tokenizer.to_hf(c)
    rebuilt.encode_special_tokens = True
    for text in texts():
        assert enc.encode(text, disallowed_special=()) == tok.encode(text).ids == rebuilt.encode(text).ids, text


def test_a_split_pattern_the_two_regex_engines_read_differently_is_refused(trained, tmp_path):
    _, tok = trained
    other = Tokenizer.from_str(tok.to_str())
    other.pre_tokenizer = split_bytelevel(tokenizer.CL100K_PATTERN)
    # Oniguruma reads \p{N}{1,3}+ as (?:\p{N}{1,3})+: one piece for a whole digit run, where tiktoken cuts every 3
    assert len(other.pre_tokenizer.pre_tokenize_str("1234567")) == 1
    with pytest.raises(ValueError, match=r"interval followed by '\+'.*encodings would differ"):
        read_tokenizer(hf_json(tmp_path, other))


# -- nanoGPT meta.pkl and the restricted unpickler ----------------------------------------------------------------


class Payload:
    pass


def test_plain_meta_pkl_reads_as_char(tmp_path):
    chars = sorted(set("hello world\n"))
    meta = {"vocab_size": len(chars), "itos": dict(enumerate(chars)), "stoi": {c: i for i, c in enumerate(chars)}}
    (tmp_path / "meta.pkl").write_bytes(pickle.dumps(meta))
    assert read_tokenizer(tmp_path / "meta.pkl") == {"kind": "char", "itos": chars}
    assert read_tokenizer(tmp_path) == {"kind": "char", "itos": chars}  # a directory with only meta.pkl


@pytest.mark.parametrize(
    "value, message",
    [
        (os.system, r"refers to (posix|os|nt)\.system"),
        (Payload(), r"refers to .*Payload"),
        ({"itos": {0: "a"}, "x": np.int64(3)}, r"refers to numpy"),
        ({"itos": {0: "a"}, "x": 1.5}, r"holds a float"),
        ({"itos": {0: "a"}, "x": {1, 2}}, r"holds a set"),
    ],
)
def test_restricted_unpickler_refuses_anything_but_plain_data(tmp_path, value, message):
    path = tmp_path / "meta.pkl"
    path.write_bytes(pickle.dumps(value, protocol=4))
    with pytest.raises(ValueError, match=r"refused pickle: " + message):
        load_plain(path)
    with pytest.raises(ValueError, match=message):
        read_tokenizer(path)


def test_char_meta_json_still_reads(tmp_path):
    (tmp_path / "meta.json").write_text(json.dumps({"vocab_size": 2, "itos": ["a", "b"]}))
    assert read_tokenizer(tmp_path / "meta.json") == {"kind": "char", "itos": ["a", "b"]}
    with pytest.raises(ValueError, match=r"--eos applies to BPE"):
        read_tokenizer(tmp_path / "meta.json", eos=EOT)


# -- the model must have a row for every token --------------------------------------------------------------------


def test_a_vocabulary_larger_than_the_models_is_refused_before_compiling(trained, tmp_path, fixtures):
    from gpt_aot.compiler.pipeline import compile_artifact
    from gpt_aot.compiler.target import resolve

    c = read_tokenizer(trained[0] / "tokenizer.json")
    tokenizer.check_fits(c, TRAINED)
    tokenizer.check_fits(c, 512)  # padded vocabularies are fine
    with pytest.raises(ValueError, match=rf"the tokenizer has {TRAINED} tokens but the model's vocab_size is 499"):
        tokenizer.check_fits(c, TRAINED - 1)
    model = fixtures.tiny_model("math")  # vocab_size 96
    with pytest.raises(ValueError, match=rf"{TRAINED} tokens but the model's vocab_size is 96"):
        compile_artifact(model, resolve("cpu", "auto", "fp32"), tmp_path / "cpu", "m", c, attention="math")
    assert not (tmp_path / "cpu").exists()


# -- prepare-data --tokenizer bpe:N ---------------------------------------------------------------------------------


def test_prepare_bpe_dataset_ids_are_the_canonical_encoders(tmp_path):
    text = corpus(seed=3, words=3000) + "a \n\n  b\n \nc  \nd\t\n\n\u3000x\n\u0085y\n"
    stats = bpe_data.prepare(tmp_path, 400, text)
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta == {"kind": "bpe", "vocab_size": 400, "tokenizer": "tokenizer.json"} and stats["vocab_size"] == 400
    c = read_tokenizer(tmp_path / "meta.json")
    assert c == read_tokenizer(tmp_path / "tokenizer.json") == read_tokenizer(tmp_path)
    train = np.fromfile(tmp_path / "train.bin", dtype=np.uint16)
    val = np.fromfile(tmp_path / "val.bin", dtype=np.uint16)
    ids = tokenizer.to_tiktoken(c).encode(text, disallowed_special=())
    assert len(train) == int(len(ids) * 0.9) == stats["train_tokens"]
    assert np.concatenate([train, val]).tolist() == ids


def test_prepare_bpe_refuses_sizes_that_cannot_work(tmp_path):
    with pytest.raises(ValueError, match=r"at least 257"):
        bpe_data.prepare(tmp_path, 256, "text")
    with pytest.raises(ValueError, match=r"uint16"):
        bpe_data.prepare(tmp_path, 70_000, "text")
    assert main(["prepare-data", "--tokenizer", "wordpiece:5", "--out", str(tmp_path)]) == 1


def test_command_line_options_reach_the_reader_and_the_size_check(trained, tmp_path, capsys):
    ranks = str(trained[0] / "ranks.tiktoken")
    out = str(tmp_path / "m")
    assert main(["compile", "--config", "tiny", "--tokenizer", ranks, "-o", out]) == 1
    assert "--bpe-pattern" in capsys.readouterr().err
    args = ["compile", "--config", "tiny", "--tokenizer", ranks, "--bpe-pattern", "gpt2", "--special", f"{EOT}=0"]
    assert main([*args, "--eos", "<|none|>", "-o", out]) == 1
    assert "EOS token '<|none|>' is not a special token" in capsys.readouterr().err
    assert main([*args, "--eos", "none", "--set", "vocab_size=300", "-o", out]) == 1
    assert f"the tokenizer has {TRAINED} tokens but the model's vocab_size is 300" in capsys.readouterr().err
    assert main(["compile", "--config", "tiny", "--eos", EOT, "-o", out]) == 1
    assert "describe a --tokenizer" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()


# -- one tiny compile through the command line ----------------------------------------------------------------------


def test_compile_with_a_bpe_tokenizer_writes_the_canonical_form(artifacts, fixtures):
    # tiny-bpe: `gpt_aot compile --tokenizer bible_bpe/tokenizer.json` (tests/fixtures/build_artifacts.py).
    artifact = artifacts / "tiny-bpe" / "cpu"
    manifest = json.loads((artifact / "manifest.json").read_text())
    stored = json.loads((artifact / "tokenizer.json").read_text())
    assert manifest["tokenizer"] == {"file": "tokenizer.json", "kind": "bpe"}
    assert manifest["model"]["vocab_size"] == fixtures.BPE_TOKENS
    assert stored == read_tokenizer(artifacts / "bible_bpe" / "tokenizer.json")
    assert read_tokenizer(artifact / "tokenizer.json") == stored  # an artifact's form reads back
    assert stored["eos"] == stored["special"][EOT]
    assert isinstance(tokenizer.to_tiktoken(stored), tiktoken.Encoding)


@pytest.mark.parametrize("pattern", ["gpt2", "cl100k_base", "o200k_base"])
def test_to_hf_splits_and_merges_as_tiktoken_for_each_known_pattern(trained, pattern):
    c = read_tokenizer(trained[0] / "ranks.tiktoken", pattern, [f"{EOT}=0"])
    enc, hf = tokenizer.to_tiktoken(c), tokenizer.to_hf(c)
    hf.encode_special_tokens = True
    for text in texts():
        assert enc.encode(text, disallowed_special=()) == hf.encode(text).ids, text


# -- files other tools write: transformers 5.x save_pretrained, GPT-2's vocab.json, tiktoken's id gaps ------------

# GPT-2's post-processor as transformers 5.x's save_pretrained writes it: a template that adds nothing.
TRANSFORMERS5_POST_PROCESSOR = {
    "type": "TemplateProcessing",
    "single": [{"Sequence": {"id": "A", "type_id": 0}}],
    "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
    "special_tokens": {},
}
# Merges whose results spell GPT-2's own vocabulary entries "Ġthe" and "model" (GPT-2's vocab.json has a key "model").
GPT2_MERGES = [("Ġ", "t"), ("Ġt", "h"), ("h", "e"), ("Ġth", "e"), ("m", "o"), ("mo", "d"), ("mod", "e"), ("mode", "l")]
ENCODED = ["the model", " the model the", "themodel", "model", "Models and the modem", "  the\n\nmodel  ", "héllo 😀"]


def gpt2_files(directory: Path) -> Path:
    """A small vocab.json + merges.txt in GPT-2's own layout (merge results, then <|endoftext|> last)."""
    directory.mkdir(parents=True, exist_ok=True)
    vocab = byte_vocab()
    for a, b in GPT2_MERGES:
        vocab[a + b] = len(vocab)
    vocab[EOT] = len(vocab)
    (directory / "vocab.json").write_text(json.dumps(vocab))
    (directory / "merges.txt").write_text("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in GPT2_MERGES))
    return directory


def test_a_gpt2_vocab_json_holding_the_token_model_is_read_as_vocab_json(tmp_path):
    source = gpt2_files(tmp_path)
    assert isinstance(json.loads((source / "vocab.json").read_text())["model"], int)
    c = read_tokenizer(source / "vocab.json")
    assert c == read_tokenizer(source) == read_tokenizer(source / "merges.txt")
    assert base64.b64decode(c["vocab"][json.loads((source / "vocab.json").read_text())["model"]]) == b"model"
    assert tokenizer.to_tiktoken(c).encode("model") == [263]  # one token: the last merge's result


def test_transformers_save_pretrained_gpt2_tokenizer_imports_and_encodes_as_hf(tmp_path):
    import transformers

    source = gpt2_files(tmp_path / "gpt2")
    hf = transformers.GPT2TokenizerFast.from_pretrained(str(source))  # from vocab.json + merges.txt, no hub
    hf.save_pretrained(str(tmp_path / "saved"))
    saved = tmp_path / "saved" / "tokenizer.json"
    obj = json.loads(saved.read_text())
    if (obj.get("post_processor") or {}).get("type") != "TemplateProcessing":
        # This transformers writes no template: put in the one transformers 5.x writes, to import that shape.
        obj["post_processor"] = TRANSFORMERS5_POST_PROCESSOR
        saved.write_text(json.dumps(obj))
    c = read_tokenizer(tmp_path / "saved")  # the directory save_pretrained wrote
    assert c == read_tokenizer(saved) == read_tokenizer(source)
    assert c["special"] == {EOT: hf.eos_token_id} and c["eos"] == hf.eos_token_id
    enc = tokenizer.to_tiktoken(c)
    for text in ENCODED:
        assert enc.encode(text, disallowed_special=()) == hf(text)["input_ids"], text
    assert enc.encode(f"the{EOT}model", allowed_special="all") == hf(f"the{EOT}model")["input_ids"]


def test_post_processors_that_add_no_token_are_accepted_and_those_that_do_refused(tmp_path):
    from tokenizers import processors

    base = gpt2_files(tmp_path / "gpt2")
    expected = read_tokenizer(base)
    obj = json.loads(hf_tokenizer_json(base).read_text())
    eot = expected["eos"]

    def imported(post: dict) -> dict:
        obj["post_processor"] = post
        path = tmp_path / "tokenizer.json"
        path.write_text(json.dumps(obj))
        return read_tokenizer(path)

    nothing = processors.TemplateProcessing(single="$A", pair="$A $B:1")
    assert imported(TRANSFORMERS5_POST_PROCESSOR) == expected
    assert imported(processor_json(nothing)) == expected
    assert imported(processor_json(processors.ByteLevel(trim_offsets=True))) == expected
    both = processors.Sequence([processors.ByteLevel(trim_offsets=False), nothing])
    assert imported(processor_json(both)) == expected
    bos = processors.TemplateProcessing(single=f"{EOT} $A", pair=f"{EOT} $A $B:1", special_tokens=[(EOT, eot)])
    with pytest.raises(ValueError, match=r"post-processor TemplateProcessing adds <\|endoftext\|> to every text"):
        imported(processor_json(bos))
    with pytest.raises(ValueError, match=r"post-processor TemplateProcessing adds <\|endoftext\|> to every text"):
        imported(processor_json(processors.Sequence([processors.ByteLevel(), bos])))
    pair_only = processors.TemplateProcessing(single="$A", pair=f"$A {EOT} $B:1", special_tokens=[(EOT, eot)])
    with pytest.raises(ValueError, match=r"post-processor TemplateProcessing adds <\|endoftext\|> to a pair"):
        imported(processor_json(pair_only))
    roberta = processors.RobertaProcessing((EOT, eot), (EOT, eot))
    with pytest.raises(ValueError, match=r"post-processor RobertaProcessing adds tokens: not supported"):
        imported(processor_json(roberta))


def hf_tokenizer_json(gpt2_dir: Path) -> Path:
    """The Hugging Face tokenizer.json of a GPT-2 vocab.json + merges.txt, written by `tokenizers` itself."""
    from tokenizers import AddedToken, decoders

    tok = Tokenizer(models.BPE(vocab=json.loads((gpt2_dir / "vocab.json").read_text()), merges=GPT2_MERGES))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(EOT, special=True, normalized=False)])
    path = gpt2_dir.parent / "hf" / "tokenizer.json"
    path.parent.mkdir(exist_ok=True)
    tok.save(str(path))
    return path


def processor_json(processor) -> dict:
    """A post-processor's tokenizer.json entry, as `tokenizers` serialises it."""
    tok = Tokenizer(models.BPE())
    tok.post_processor = processor
    return json.loads(tok.to_str())["post_processor"]


# cl100k_base's special tokens at their real ids: 100256 (after the last rank, 100255) and 100261..100275 are gaps.
CL100K_SPECIAL = {
    EOT: 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}


def dump_tiktoken_ranks(path: Path, ranks: dict[bytes, int]) -> Path:
    """tiktoken.load.dump_tiktoken_bpe's format, byte for byte (that function needs blobfile): 'base64 rank' lines."""
    path.write_bytes(
        b"".join(
            base64.b64encode(t) + b" " + str(r).encode() + b"\n" for t, r in sorted(ranks.items(), key=lambda kv: kv[1])
        )
    )
    return path


def trained_ranks(trained) -> dict[bytes, int]:
    """The trained BPE's ranks renumbered 0..N-1 in merge order (EOT, its id 0, left out)."""
    tokens = [t for _, t in sorted((i, to_bytes(k)) for k, i in trained[1].get_vocab().items() if k != EOT)]
    return {t: i for i, t in enumerate(tokens)}


def test_a_tiktoken_rank_file_with_cl100k_id_gaps_imports_as_tiktoken_encodes(trained, tmp_path, monkeypatch):
    from tiktoken.load import load_tiktoken_bpe

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")  # read the file itself, not a cached copy
    ranks = trained_ranks(trained)
    path = dump_tiktoken_ranks(tmp_path / "cl100k_layout.tiktoken", ranks)
    special = [f"{text}={i}" for text, i in CL100K_SPECIAL.items()]
    c = read_tokenizer(path, "cl100k_base", special)
    reference = tiktoken.Encoding(
        "cl100k_layout",
        pat_str=tokenizer.CL100K_PATTERN,
        mergeable_ranks=load_tiktoken_bpe(str(path)),
        special_tokens=CL100K_SPECIAL,
    )
    assert len(c["vocab"]) == reference.n_vocab == 100277 and c["special"] == CL100K_SPECIAL and c["eos"] == 100257
    gaps = [i for i, t in enumerate(c["vocab"]) if t is None and i not in CL100K_SPECIAL.values()]
    assert gaps == [*range(len(ranks), 100257), *range(100261, 100276)]
    enc = tokenizer.to_tiktoken(c)
    specials = "".join(CL100K_SPECIAL) + f"a{EOT}b<|fim_prefix|>x = 1<|fim_suffix|>\n<|fim_middle|><|endofprompt|>"
    for text in [*texts(), specials]:
        assert enc.encode(text, allowed_special="all") == reference.encode(text, allowed_special="all"), text
        assert enc.encode(text, disallowed_special=()) == reference.encode(text, disallowed_special=()), text
    assert reference.encode(specials, allowed_special="all").count(100276) == 2
    tokenizer.check_fits(c, 100277)
    with pytest.raises(ValueError, match=r"the tokenizer has 100277 tokens but the model's vocab_size is 100276"):
        tokenizer.check_fits(c, 100276)
    assert read_tokenizer(write_canonical(tmp_path, c)) == c  # an artifact's form with gaps reads back


def write_canonical(tmp_path: Path, c: dict) -> Path:
    path = tmp_path / "canonical" / "tokenizer.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(c))
    return path


def test_id_gaps_are_accepted_and_collisions_refused_by_name(tmp_path):
    single = [bytes([b]) for b in range(256)]
    path = write_ranks(tmp_path / "ok.tiktoken", [*single, b"ab"])
    c = read_tokenizer(path, "gpt2", [f"{EOT}=300"])
    assert len(c["vocab"]) == 301 and c["vocab"][257:300] == [None] * 43 and c["special"] == {EOT: 300}
    (tmp_path / "gpt2").mkdir()
    assert read_tokenizer(gpt2_layout(tmp_path / "gpt2", {"Ġt": 256, EOT: 300}, ["Ġ t"]))["vocab"][257:] == [None] * 44
    with pytest.raises(ValueError, match=r"duplicate id 256: token b'ab' and special token '<\|endoftext\|>'"):
        read_tokenizer(path, "gpt2", [f"{EOT}=256"])  # a special token's id equal to a rank
    with pytest.raises(ValueError, match=r"duplicate id 300: special token '<\|a\|>' and special token '<\|b\|>'"):
        read_tokenizer(path, "gpt2", ["<|a|>=300", "<|b|>=300"])
    with pytest.raises(ValueError, match=r"special token 'ab' \(id 300\) has the bytes of ordinary token 256"):
        read_tokenizer(path, "gpt2", ["ab=300"])
    with pytest.raises(ValueError, match=r"token b'ab' has a negative id -1"):
        read_tokenizer(ranks_with(tmp_path, single, {b"ab": -1}), "gpt2")
    with pytest.raises(ValueError, match=r"special token '<\|endoftext\|>' has id 16777216, beyond"):
        read_tokenizer(path, "gpt2", [f"{EOT}={2**24}"])


def ranks_with(tmp_path: Path, single: list[bytes], extra: dict[bytes, int]) -> Path:
    path = tmp_path / "extra.tiktoken"
    lines = [f"{base64.b64encode(t).decode()} {i}\n" for i, t in enumerate(single)]
    lines += [f"{base64.b64encode(t).decode()} {i}\n" for t, i in extra.items()]
    path.write_text("".join(lines))
    return path
