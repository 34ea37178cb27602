"""OpenAI's encodings leave ids without a token: cl100k_base has no id 100256 (its last rank is 100255), its
special tokens are 100257..100260 and 100276, with 100261..100275 missing. A rank file in tiktoken's own format
(read by tiktoken's own loader) with that id layout is imported, then encoded by the runtime's reader
(tests/text/tokenizer_tool) under a model's vocab_size, and both must give tiktoken.Encoding's ids, special tokens
allowed or not. The ranks are a small byte-level BPE trained here (cl100k's own file cannot be fetched)."""

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tiktoken
from tiktoken.load import load_tiktoken_bpe
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from gpt_aot.importers.tokenizer_import import read_tokenizer
from gpt_aot.text import data, tokenizer
from gpt_aot.text.byte_level import to_bytes

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hard_strings import HARD_STRINGS  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TOOL = Path(os.environ.get("GPT_TOKENIZER_TOOL", ROOT / "build" / "tests" / "tokenizer_tool"))
CL100K_SPECIAL = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}
MODEL_VOCAB = 100288  # a model's vocab_size for it: 100277 ids, padded to a multiple of 64
WITH_SPECIALS = [
    "<|endoftext|>",
    "a<|endoftext|>b",
    "<|fim_prefix|>def f(x):<|fim_suffix|>\n    return x<|fim_middle|>",
    "question<|endofprompt|> answer<|endoftext|><|endoftext|>",
    "<|endoftext <|fim_middle|>|>",
]


@pytest.fixture(scope="module")
def layout(tmp_path_factory):
    """(rank file, tiktoken's Encoding of it with cl100k's specials, the imported canonical form)."""
    d = tmp_path_factory.mktemp("cl100k_layout")
    hf = Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = trainers.BpeTrainer(
        vocab_size=600, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    hf.train_from_iterator(data.corpus_text()[:300_000].splitlines(keepends=True), trainer)
    ranks = {to_bytes(token): i for token, i in hf.get_vocab().items()}  # ids 0..599: merge order
    path = d / "cl100k_layout.tiktoken"
    # tiktoken.load.dump_tiktoken_bpe's bytes (that function needs blobfile): "base64 rank" lines in rank order.
    path.write_bytes(b"".join(base64.b64encode(t) + b" %d\n" % r for t, r in sorted(ranks.items(), key=lambda x: x[1])))
    with pytest.MonkeyPatch.context() as env:
        env.setenv("TIKTOKEN_CACHE_DIR", "")  # the file itself, not a copy cached under its path by another run
        loaded = load_tiktoken_bpe(str(path))
    reference = tiktoken.Encoding(
        "cl100k_layout", pat_str=tokenizer.CL100K_PATTERN, mergeable_ranks=loaded, special_tokens=CL100K_SPECIAL
    )
    canonical = read_tokenizer(path, "cl100k_base", [f"{text}={i}" for text, i in CL100K_SPECIAL.items()])
    return path, reference, canonical


def run_tool(canonical: dict, path: Path, texts: list[str], special: bool) -> list[dict]:
    path.write_text(json.dumps(canonical))
    lines = "".join(json.dumps({"text": t, "special": special}) + "\n" for t in texts)
    done = subprocess.run([str(TOOL), str(path), "bpe", str(MODEL_VOCAB)], input=lines.encode(), capture_output=True)
    assert done.returncode == 0, done.stdout.decode(errors="replace") + done.stderr.decode(errors="replace")
    replies = [json.loads(line) for line in done.stdout.decode().split("\n") if line]
    assert len(replies) == len(texts)
    return replies


def test_the_layout_is_cl100k_s(layout):
    _, reference, canonical = layout
    assert reference.n_vocab == len(canonical["vocab"]) == 100277 and reference.eot_token == 100257
    assert canonical["special"] == CL100K_SPECIAL and canonical["eos"] == 100257
    gaps = [i for i, t in enumerate(canonical["vocab"]) if t is None and i not in CL100K_SPECIAL.values()]
    assert gaps == [*range(600, 100257), *range(100261, 100276)]  # 100256 among them, as in cl100k_base


@pytest.mark.parametrize("special", [False, True], ids=["ordinary", "special-allowed"])
def test_import_and_runtime_encode_as_tiktoken(layout, tmp_path, special):
    _, reference, canonical = layout
    texts = HARD_STRINGS + data.corpus_text()[300_000:320_000].split("\n") + WITH_SPECIALS
    if special:
        expected = [reference.encode(t, allowed_special="all") for t in texts]
    else:
        expected = [reference.encode_ordinary(t) for t in texts]
    imported = tokenizer.to_tiktoken(canonical)
    assert [imported.encode(t, allowed_special="all" if special else set(), disallowed_special=()) for t in texts] == (
        expected
    )
    replies = run_tool(canonical, tmp_path / "tokenizer.json", texts, special)
    wrong = [t for t, r, want in zip(texts, replies, expected, strict=True) if r.get("ids") != want]
    assert not wrong, f"{len(wrong)} of {len(texts)} differ from tiktoken, e.g. {wrong[:3]!r}"
    for text, reply in zip(texts, replies, strict=True):
        assert reply["decoded"] == text
    if special:
        assert {100257, 100258, 100259, 100260, 100276} <= {i for r in replies for i in r["ids"]}
