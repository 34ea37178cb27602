"""The server benchmark's one set of weights, in both servers' forms (issue #26).

    .venv/bin/python bench/server_weights.py [--seed 1337] [--skip-compile] [--skip-gguf] [--size 124m]

GPT-2 124M (12 layers, 12 heads, 768 wide, vocab 50257, context 1024) initialised as nanoGPT does
from --seed (gpt_aot's init_weights, as bench/suite.py's GPT-2 rows), written once in Hugging Face
layout and in bf16, so both servers read the very same bits:

- bench/work/server/hf-gpt2-124m/     config.json, model.safetensors (bf16), vocab.json, merges.txt
                                      (GPT-2's real BPE: the r50k ranks of tests/fixtures/gpt2_ranks.py)
- bench/work/server/gpt2-124m/cpu     our artifact: `gpt_aot compile --ckpt` that safetensors, bf16,
                                      --tokenizer that vocab.json + merges.txt, --max-batch 16, math
                                      attention with decode's chunked, panels linears (compile_ours)
- bench/work/server/gpt2-124m-bf16.gguf  llama.cpp's: convert_hf_to_gguf.py --outtype bf16
                                      (bench/llama_setup.sh builds llama.cpp first)
- bench/work/server/reference.json    PyTorch (transformers' GPT2LMHeadModel, fp32 math on the bf16
                                      weights) greedy tokens for the check prompt: what both servers'
                                      greedy completions are compared with (bench/server_bench.py)

The MLP is GPT-2's tanh GELU on both sides (Hugging Face layout: `gelu_new`; llama.cpp's GPT-2 graph).
Each step is skipped when its output exists; delete bench/work/server/ to start over.

`--size 355m` (bench/gpt2_sizes.py) writes GPT-2 355M's weights the same way, hf-gpt2-355m/ and
gpt2-355m-bf16.gguf, for the decode benchmark (bench/int8_bench.py --size 355m); the server's artifact and
reference are 124M's alone.
"""

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import torch
from gpt2_sizes import SIZES, Files, config  # bench/ is on the path of a bench script

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
WORK = ROOT / "bench" / "work" / "server"
HF_DIR = Files("124m").hf_dir
ARTIFACT = WORK / "gpt2-124m"
GGUF = Files("124m").bf16_gguf
REFERENCE = WORK / "reference.json"
LLAMA_SRC = ROOT / "bench" / "work" / "llama" / "src"
GPT2 = config("124m")
EOT = "<|endoftext|>"
CHECK_PROMPT = "In the beginning God created the heaven and the earth."
CHECK_TOKENS = 32
MAX_BATCH = 16

sys.path.insert(0, str(ROOT / "tests" / "fixtures"))
# Hugging Face's GPT-2 stores these linears as Conv1D, (in, out): nanoGPT's nn.Linear transposed.
CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")


def gpt2_tokenizer() -> dict:
    import gpt2_ranks

    from gpt_aot.importers.tokenizer_import import read_tokenizer

    return read_tokenizer(gpt2_ranks.path(), pattern="gpt2", special=[f"{EOT}=50256"])


def write_hf_tokenizer(tokenizer: dict, out: Path) -> None:
    """vocab.json + merges.txt as GPT-2 ships them, from the ranks (merges reconstructed as
    Hugging Face's tiktoken converter does)."""
    from gpt_aot.text.byte_level import to_chars
    from gpt_aot.text.tokenizer import merges, ranks

    vocab = {to_chars(token): i for token, i in ranks(tokenizer).items()}
    vocab.update(tokenizer["special"])
    (out / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False))
    lines = [f"{to_chars(a)} {to_chars(b)}" for a, b in merges(tokenizer)]
    (out / "merges.txt").write_text("#version: 0.2\n" + "\n".join(lines) + "\n", encoding="utf-8")


def write_hf_model(seed: int, out: Path, shape: dict = GPT2):
    """nanoGPT's init from `seed` of a model of `shape` (gpt2_sizes.config), saved as transformers'
    GPT2LMHeadModel in bf16; returns that model."""
    import transformers

    from gpt_aot.model.gpt import GPT, GPTConfig

    ours = GPT(GPTConfig(**shape)).init_weights(seed)
    state = {}
    for name, value in ours.state_dict().items():
        if name == "lm_head.weight":
            continue  # tied to wte
        if name == "transformer.wte.weight":
            value = value[: shape["vocab_size"]]  # the rows past the vocabulary are padding
        state[name] = value.t().contiguous() if name.endswith(CONV1D) else value
    config = transformers.GPT2Config(
        vocab_size=shape["vocab_size"], n_positions=shape["block_size"], n_embd=shape["n_embd"],
        n_layer=shape["n_layer"], n_head=shape["n_head"], activation_function="gelu_new",
        bos_token_id=50256, eos_token_id=50256,
    )  # fmt: skip
    model = transformers.GPT2LMHeadModel(config).eval()
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if k != "lm_head.weight" and not k.endswith((".attn.bias", ".attn.masked_bias"))]
    if missing or unexpected:
        raise RuntimeError(f"weights do not fit GPT2LMHeadModel: missing {missing}, unexpected {unexpected}")
    model.tie_weights()
    model.to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
    # GPT-2's own config.json also says n_ctx, which convert_hf_to_gguf.py reads; transformers 5 leaves it out.
    config_file = out / "config.json"
    config_file.write_text(json.dumps(json.loads(config_file.read_text()) | {"n_ctx": shape["block_size"]}, indent=2))
    return model


def pytorch_greedy(prompt: list[int], n: int, hf_dir: Path = HF_DIR) -> tuple[list[int], list[float]]:
    """n greedy tokens after `prompt` from the saved bf16 weights in `hf_dir`, computed in fp32 by
    transformers, and the logit gap between the first and second choice at each step."""
    import transformers

    model = transformers.GPT2LMHeadModel.from_pretrained(hf_dir, dtype=torch.float32).eval()
    ids, margins = torch.tensor([prompt]), []
    with torch.no_grad():
        for _ in range(n):
            logits = model(ids).logits[0, -1]
            top = torch.topk(logits, 2).values
            margins.append(float(top[0] - top[1]))
            ids = torch.cat([ids, logits.argmax().view(1, 1)], dim=1)
    return ids[0, len(prompt) :].tolist(), margins


def reference(tokenizer: dict) -> dict:
    """Greedy tokens of CHECK_PROMPT from the saved bf16 weights (pytorch_greedy)."""
    from gpt_aot.text.tokenizer import encode, to_tiktoken

    prompt = encode(tokenizer, CHECK_PROMPT)
    tokens, margins = pytorch_greedy(prompt, CHECK_TOKENS)
    return {
        "prompt": CHECK_PROMPT,
        "prompt_ids": prompt,
        "tokens": tokens,
        "text": to_tiktoken(tokenizer).decode(tokens),
        "top2_margins": margins,  # logit gap between the first and second choice at each step
    }


def compile_ours() -> float:
    # --tokenizer names merges.txt (vocab.json is read beside it): given vocab.json or the directory,
    # the importer takes GPT-2's vocab.json for an HF tokenizer.json, as it has a "model" key (token 19849).
    cmd = [PY, "-m", "gpt_aot", "compile", "--ckpt", str(HF_DIR / "model.safetensors"), "--set", "n_head=12"]
    # The forms the server results were measured with, named rather than picked: a pick measured while the host
    # is busy can differ from run to run, and decode's `chunked` attention is what exports the `mixed` graph
    # that lets a round's prompt pieces ride in the streams' decode step (bench/results/cpu-2026-11-28-server-mixed/).
    cmd += ["--tokenizer", str(HF_DIR / "merges.txt"), "--target", "cpu", "--dtype", "bf16", "--attention", "math"]
    cmd += ["--decode-attention", "chunked", "--decode-linear", "panels", "--batched-linear", "panels"]
    cmd += ["--max-batch", str(MAX_BATCH), "-o", str(ARTIFACT)]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True)
    return time.perf_counter() - t0


def convert_gguf(outtype: str = "bf16", out: Path = GGUF, hf_dir: Path = HF_DIR) -> None:
    """`hf_dir` as a GGUF of `outtype` at `out`, by llama.cpp's own converter; whole or not at all."""
    converter = LLAMA_SRC / "convert_hf_to_gguf.py"
    if not converter.exists():
        raise SystemExit(f"{converter} missing: run bench/llama_setup.sh first")
    partial = out.with_suffix(".partial")
    subprocess.run([PY, str(converter), str(hf_dir), "--outtype", outtype, "--outfile", str(partial)], check=True)
    partial.replace(out)


def write_size(size: str, seed: int, tokenizer: dict, gguf: bool) -> int:
    """Another size's weights (and its bf16 GGUF), each skipped when it exists."""
    files = Files(size)
    if not (files.hf_dir / "model.safetensors").exists():
        partial = files.hf_dir.with_name(files.hf_dir.name + ".partial")
        partial.mkdir(parents=True, exist_ok=True)
        write_hf_tokenizer(tokenizer, partial)
        write_hf_model(seed, partial, config(size))
        (partial / "seed.json").write_text(json.dumps({"seed": seed, "config": config(size)}))
        partial.rename(files.hf_dir)
        print(f"wrote {files.hf_dir}", flush=True)
    if gguf and not files.bf16_gguf.exists():
        convert_gguf("bf16", files.bf16_gguf, files.hf_dir)
        print(f"wrote {files.bf16_gguf}", flush=True)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--skip-compile", action="store_true", help="leave our artifact out")
    ap.add_argument("--skip-gguf", action="store_true", help="leave the GGUF out")
    ap.add_argument("--size", choices=SIZES, default="124m", help="GPT-2's size (other than 124m: weights and GGUF)")
    args = ap.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    tokenizer = gpt2_tokenizer()
    if args.size != "124m":
        return write_size(args.size, args.seed, tokenizer, gguf=not args.skip_gguf)
    if not (HF_DIR / "model.safetensors").exists():
        HF_DIR.mkdir(parents=True, exist_ok=True)
        write_hf_tokenizer(tokenizer, HF_DIR)
        write_hf_model(args.seed, HF_DIR)
        (WORK / "seed.json").write_text(json.dumps({"seed": args.seed, "config": GPT2}))
        print(f"wrote {HF_DIR}", flush=True)
    if not REFERENCE.exists():
        REFERENCE.write_text(json.dumps(reference(tokenizer), indent=1))
        print(f"wrote {REFERENCE}", flush=True)
    if not args.skip_gguf and not GGUF.exists():
        convert_gguf()
        print(f"wrote {GGUF}", flush=True)
    if not args.skip_compile and not (ARTIFACT / "cpu" / "manifest.json").exists():
        seconds = compile_ours()
        (WORK / "compile.json").write_text(json.dumps({"seconds": seconds}))
        print(f"compiled {ARTIFACT} in {seconds:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
