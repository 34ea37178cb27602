"""`gpt generate` on a byte-level BPE model (the fixtures' tiny-bpe): `--prompt` prints the
prompt and the text that follows as valid UTF-8, greedy output is exactly what the artifact's
own graphs give when run from Python and decoded by tiktoken (stopping where they reach EOS),
`--prompt-ids` with the prompt's ids prints the same, and `gpt info` names the tokenizer and EOS.
"""

import json
import os
import subprocess
from pathlib import Path

import pytest
import torch

from gpt_aot.artifact.loader import ArtifactGraphs
from gpt_aot.text.tokenizer import to_tiktoken

ROOT = Path(__file__).resolve().parents[2]
CLI = Path(os.environ.get("GPT_CLI", ROOT / "build" / "cli" / "gpt"))
PROMPT = "In the beginning"
N = 24

pytestmark = pytest.mark.skipif(not CLI.exists(), reason=f"gpt CLI not built at {CLI}")


@pytest.fixture(scope="module")
def bpe(artifacts):
    directory = artifacts / "tiny-bpe" / "cpu"
    tokenizer = json.loads((directory / "tokenizer.json").read_text())
    return directory, tokenizer, to_tiktoken(tokenizer)


def gpt(*args) -> bytes:
    result = subprocess.run([str(CLI), *map(str, args)], capture_output=True, timeout=120)
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    return result.stdout


def greedy_reference(directory: Path, prompt: list[int], n: int, eos: int | None) -> list[int]:
    """Greedy decoding through the artifact's compiled graphs as the runtime runs them (prefill, then
    decode_one per token), stopping before EOS as the runtime does by default."""
    graphs = ArtifactGraphs(directory)
    model = graphs.manifest["model"]
    assert len(prompt) + n <= model["block_size"], "the reference does not slide the context"
    kv = graphs.new_kv_cache(1)
    out: list[int] = []
    with torch.no_grad():
        logits = graphs.prefill(torch.tensor([prompt]), kv)
        while len(out) < n:
            row = logits[0, : model["vocab_size"]]
            top = row.topk(2).values
            assert top[0] - top[1] > 1e-4, "a near tie: greedy is not well defined at this step"
            token = int(row.argmax())
            if token == eos:
                break
            out.append(token)
            position = torch.tensor([len(prompt) + len(out) - 1])
            logits = graphs.decode(torch.tensor([[token]]), position, kv)
    return out


def test_generate_prompt_prints_the_prompt_and_text_after_it(bpe):
    directory, _, _ = bpe
    stdout = gpt("generate", directory, "--prompt", PROMPT, "-n", N, "--seed", 3)
    text = stdout.decode("utf-8")  # strict: the stream never shows a broken character
    assert text.startswith(PROMPT)
    assert text.endswith("\n")
    assert len(text.rstrip("\n")) > len(PROMPT), f"nothing generated: {text!r}"


def test_greedy_generate_prints_what_the_graphs_give_decoded_by_tiktoken(bpe):
    directory, tokenizer, encoding = bpe
    prompt = encoding.encode_ordinary(PROMPT)
    tokens = greedy_reference(directory, prompt, N, tokenizer.get("eos"))
    assert tokens, "the reference stopped at EOS at once: pick another prompt"
    # The CLI streams prompt and generated tokens through one detokenizer: invalid UTF-8 is
    # replaced as Python's errors="replace" does, then one newline ends the output.
    expected = encoding.decode_bytes(prompt + tokens).decode("utf-8", errors="replace") + "\n"
    assert encoding.decode(prompt) == PROMPT
    by_text = gpt("generate", directory, "--prompt", PROMPT, "-n", N, "--temperature", 0)
    assert by_text.decode("utf-8") == expected
    by_ids = gpt("generate", directory, "--prompt-ids", *prompt, "-n", N, "--temperature", 0)
    assert by_ids == by_text


def test_info_names_the_bpe_tokenizer_and_its_eos_token(bpe):
    directory, tokenizer, _ = bpe
    lines = gpt("info", directory).decode("utf-8").splitlines()
    assert "tokenizer    bpe" in lines
    assert f"eos_token    {tokenizer['eos']}" in lines
