"""gpt_aot command line: prepare-data, compile, import-ckpt, export-weights, inspect, keygen, sign."""

import argparse
import json
import sys
import warnings
from pathlib import Path

from gpt_aot.artifact import signing
from gpt_aot.artifact.manifest import read_manifest
from gpt_aot.compiler import isa
from gpt_aot.compiler.graphs import MAX_BATCH
from gpt_aot.compiler.training import OptimizerConfig
from gpt_aot.importers import checkpoint
from gpt_aot.importers.tokenizer_import import read_tokenizer
from gpt_aot.importers.weights import load_model
from gpt_aot.model.config import resolve_config
from gpt_aot.text import bpe_data, data
from gpt_aot.text.tokenizer import DEFAULT_EOS, no_tokenizer, vocab_size


def _compile(args) -> int:
    # Imported here: the compiler patches torch 2.11's private functions (compiler/torch_patches.py) and refuses
    # another torch at import, which need not stop the subcommands that compile nothing (keygen, sign, inspect).
    from gpt_aot.compiler.pipeline import compile_artifact
    from gpt_aot.compiler.target import resolve

    overrides = resolve_config(args.config, args.set)  # a mistake in it is found before the target is probed
    target = resolve(args.target, args.arch, args.dtype, args.isa)
    tokenizer = _tokenizer(args)
    if args.tokenizer and "vocab_size" not in overrides:
        overrides["vocab_size"] = vocab_size(tokenizer)
    model = load_model(args.ckpt, overrides, args.seed, "math")
    out = Path(args.output) / target.dir_name
    train = None
    if args.train:
        train = OptimizerConfig(args.weight_decay, args.beta1, args.beta2, args.eps, args.grad_clip)
    manifest = compile_artifact(
        model,
        target,
        out,
        name=Path(args.output).name,
        tokenizer=tokenizer,
        attention=args.attention,
        decode_attention=args.decode_attention,
        decode_linear=args.decode_linear,
        batched_linear=args.batched_linear,
        max_batch=args.max_batch,
        train=train,
        quantize=args.quantize,
        group_size=args.group_size,
        kv_dtype=args.kv_dtype,
    )
    print(
        f"artifact {out}: attention prefill={manifest['attention']['backend']} "
        f"decode={manifest['attention']['decode']['backend']}, "
        f"linears prefill={manifest['graphs']['prefill']['linear']['form']} "
        f"decode={manifest['graphs']['decode']['linear']['form']} "
        f"single-sequence decode={manifest['graphs']['decode_one']['linear']['form']}, "
        f"{sum(f['size'] for f in manifest['files'].values()) / 1e6:.1f} MB"
    )
    return 0


def _tokenizer(args) -> dict:
    if not args.tokenizer:
        if args.bpe_pattern or args.special or args.eos:
            raise ValueError("--bpe-pattern, --special and --eos describe a --tokenizer")
        return no_tokenizer()
    eos = DEFAULT_EOS if args.eos is None else None if args.eos == "none" else args.eos
    return read_tokenizer(args.tokenizer, args.bpe_pattern, args.special, eos)


def _prepare_data(args) -> None:
    if args.tokenizer == "char":
        data.main(args.out or "data/bible_char")
        return
    kind, _, size = args.tokenizer.partition(":")
    if kind != "bpe" or not size.isdigit():
        raise ValueError(f"--tokenizer {args.tokenizer!r}: char or bpe:N (N tokens, <|endoftext|> included)")
    bpe_data.main(args.out or f"data/bible_bpe{size}", int(size))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="gpt_aot", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("prepare-data", help="write a dataset (train.bin, val.bin, meta.json; tokenizer.json for BPE)")
    p.add_argument("--tokenizer", default="char", help="char, or bpe:N (train a byte-level BPE of N tokens)")
    p.add_argument("--out", help="default: data/bible_char or data/bible_bpeN")

    p = sub.add_parser("compile", help="compile a model into model_artifacts/<name>/<target>")
    p.add_argument("--config", help="preset name or JSON file")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a config field")
    p.add_argument("--ckpt", help="nanoGPT ckpt.pt or .safetensors (nanoGPT or GPT-2 layout)")
    p.add_argument(
        "--tokenizer",
        help="meta.json/meta.pkl (char), vocab.json + merges.txt, an HF tokenizer.json (byte-level BPE), "
        "a .tiktoken rank file, or a directory holding one",
    )
    p.add_argument(
        "--bpe-pattern",
        help="a .tiktoken file's split regex, or gpt2, r50k_base, cl100k_base, o200k_base",
    )
    p.add_argument(
        "--special", action="append", default=[], metavar="TOKEN=ID", help="a .tiktoken file's special token"
    )
    p.add_argument("--eos", help="end-of-text special token (default: <|endoftext|> if present; none: no EOS)")
    p.add_argument("--seed", type=int, default=1337, help="random init seed when no --ckpt")
    p.add_argument("--target", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--arch", default="auto", help="auto, or e.g. x86_64, sm_80, sm_90")
    p.add_argument("--dtype", default="fp32", help="fp32, bf16 or fp16")
    p.add_argument(
        "--isa",
        default=isa.NATIVE,
        choices=isa.ISA_LEVELS,
        help="CPU instruction set: native (this machine's, all of it) or an x86-64 level that older CPUs also run "
        "(x86-64-v3: AVX2/FMA/BMI; x86-64-v4: AVX-512 F/BW/CD/DQ/VL)",
    )
    p.add_argument("--attention", default="auto", help="auto (measured), naive, math, flash, efficient, cudnn")
    p.add_argument(
        "--decode-attention",
        help="decode's own kernel, where it differs from --attention: auto, naive, math, flash, efficient, cudnn, "
        "or chunked (CPU: the kernel library's one-query attention over the positions each row has filled)",
    )
    p.add_argument(
        "--decode-linear",
        default="auto",
        help="auto (measured), mm, reduction, kernel (CPU: the kernel library's linear), panels (CPU, bf16: its "
        "linear on weights packed at load), (int8) int8pack, q8 (CPU: the kernel library's with int8 activations), "
        "q8panels (the same on weights packed at load) or blocked, (int4) int4pack, kernel or int4panels (the "
        "kernel library's on weights packed at load): a single sequence's decode "
        "linears (for int8, blocked lays the weights out in blocks of 32 rows)",
    )
    p.add_argument(
        "--batched-linear",
        default="auto",
        help="auto (measured for each graph), mm, onednn (CPU), kernel (CPU: the kernel library's linear), panels "
        "(CPU, bf16: its linear on weights packed at load), (int8) int8pack, q8 or q8panels (rows) or blocked "
        "(blocks of 32 rows), (int4) int4pack, kernel or int4panels: prefill's and decode's linears",
    )
    p.add_argument("--max-batch", type=int, default=MAX_BATCH)
    p.add_argument(
        "--quantize",
        choices=["int8", "int4"],
        help="int8: weight-only int8 linears, one scale per output channel (inference only; half of bf16's "
        "bytes); int4: weight-only int4 linears, a scale and a zero per group of inputs (CPU, inference only)",
    )
    p.add_argument(
        "--group-size",
        type=int,
        default=32,
        help="int4: inputs per group sharing a scale and a zero (32, 64, 128 or 256; smaller is more accurate)",
    )
    p.add_argument(
        "--kv-dtype",
        choices=["int8"],
        help="the KV cache's dtype where not the activations': int8 (CPU), each position's values rounded to int8 "
        "with a scale of its own (half of bf16's bytes, which decode reads whole every step; the kernel library's "
        "chunked attention)",
    )
    p.add_argument("--train", action="store_true", help="also compile train_step, eval_loss and AdamW graphs")
    defaults = OptimizerConfig()
    p.add_argument("--weight-decay", type=float, default=defaults.weight_decay)
    p.add_argument("--beta1", type=float, default=defaults.beta1)
    p.add_argument("--beta2", type=float, default=defaults.beta2)
    p.add_argument("--eps", type=float, default=defaults.eps)
    p.add_argument("--grad-clip", type=float, default=defaults.grad_clip, help="0 disables clipping")
    p.add_argument("-o", "--output", required=True, help="model directory, e.g. model_artifacts/char-small")

    p = sub.add_parser("import-ckpt", help="nanoGPT ckpt.pt (weights + AdamW state) -> runtime checkpoint")
    p.add_argument("ckpt")
    p.add_argument("--artifact", required=True, help="artifact directory compiled with --train")
    p.add_argument("-o", "--output", required=True)

    p = sub.add_parser("export-weights", help="runtime checkpoint -> nanoGPT-layout safetensors")
    p.add_argument("checkpoint")
    p.add_argument("--vocab-size", type=int, help="drop the padding rows beyond this vocabulary")
    p.add_argument("-o", "--output", required=True)

    p = sub.add_parser("inspect", help="print an artifact's manifest")
    p.add_argument("artifact")

    p = sub.add_parser("keygen", help="new Ed25519 signing key: PREFIX.key (secret, 0600) and PREFIX.pub")
    p.add_argument("-o", "--output", required=True, metavar="PREFIX", help="e.g. keys/release")

    p = sub.add_parser("sign", help="check an artifact's hashes and write manifest.sig with a secret key")
    p.add_argument("artifact")
    p.add_argument("--key", required=True, help="secret key file from keygen (PREFIX.key)")

    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", message=".*LeafSpec.*")  # torch-internal deprecation noise
    try:
        if args.command == "prepare-data":
            _prepare_data(args)
            return 0
        if args.command == "compile":
            return _compile(args)
        if args.command == "import-ckpt":
            it = checkpoint.import_nanogpt(Path(args.ckpt), Path(args.artifact), Path(args.output))
            print(f"runtime checkpoint {args.output} (iteration {it})")
            return 0
        if args.command == "export-weights":
            checkpoint.export_weights(Path(args.checkpoint), Path(args.output), args.vocab_size)
            return 0
        if args.command == "keygen":
            secret, public = signing.generate_keypair(Path(args.output))
            kid = signing.key_id(signing.read_public_key(public))
            print(f"secret key {secret} (keep it private), public key {public} (key id {kid})")
            return 0
        if args.command == "sign":
            key = signing.sign_artifact(Path(args.artifact), Path(args.key))
            print(f"signed {Path(args.artifact) / signing.SIGNATURE} with key {key}")
            return 0
        print(json.dumps(read_manifest(Path(args.artifact)), indent=2))
        return 0
    except (ValueError, FileNotFoundError, RuntimeError) as e:
        print(f"gpt_aot: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
