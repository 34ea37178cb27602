"""The int8 decode peers' weights (bench/int8_peers.py): the server benchmark's, quantized by each peer's own tool.

    .venv/bin/python bench/int8_weights.py [--size 124m]

From bench/work/server/hf-gpt2-124m/ (bench/server_weights.py: GPT-2 124M, nanoGPT's init from seed 1337,
Hugging Face layout, bf16), so every implementation starts from the very same bits:

- bench/work/int8/gpt2-124m-q8_0.gguf    llama.cpp's convert_hf_to_gguf.py --outtype q8_0 (bench/llama_setup.sh
                                         unpacks it): every matrix Q8_0 (blocks of 32 int8 with an f16 scale,
                                         8.5 bits a weight), token_embd too, which is also the output matrix
                                         (GPT-2 ties lm_head to it); norms, biases and the position table F32
- bench/work/int8/gpt2-124m-q4_0.gguf    llama-quantize Q4_0 of the bf16 GGUF (its converter writes no 4-bit types),
                                         as users run it: the matrices Q4_0 (blocks of 32 4-bit weights with an f16
                                         scale, 4.5 bits a weight), token_embd (also the output matrix) the type
                                         llama-quantize gives it (Q6_K); the stretch of issue #27 compares our int4
- bench/work/int8/gpt2-124m-q4_1.gguf    llama-quantize Q4_1 of the same: blocks of 32 4-bit weights with an f16
                                         scale and an f16 minimum (5 bits a weight), our int4's scheme at groups of
                                         32 (a scale and a zero per group); token_embd as llama-quantize gives it
- bench/work/int8/gpt2-124m-q4_k_m.gguf  llama-quantize Q4_K_M of the same: Q4_K matrices (super-blocks of 256, 6-bit
                                         scales and mins), some Q6_K, as llama-quantize's recipe picks them
- bench/work/int8/ct2-gpt2-124m-int8/    CTranslate2's converter (TransformersConverter, as
                                         `ct2-transformers-converter --quantization int8`): every matrix int8
                                         with a float32 scale per output row, the embeddings too, lm_head an
                                         alias of them; norms, biases and the position table stay bf16
- bench/work/int8/weights.json           per model file: its bytes, bytes per tensor type and the types of
                                         the embeddings and lm_head, read back from the files

The bf16 reference row's GGUF is bench/work/server/gpt2-124m-bf16.gguf (bench/server_weights.py); it is
listed in weights.json too. Both converters read the bf16 safetensors as they are (no fp32 copy): each
quantizes the fp32 value of every bf16 weight. Each output is skipped when it exists; delete it to make it
again. `--size 355m` converts bench/work/server/hf-gpt2-355m/ the same way (gpt2-355m-*.gguf,
ct2-gpt2-355m-int8/, weights-355m.json; bench/gpt2_sizes.py names them).
"""

import argparse
import json
import shutil
import struct
import subprocess
import sys
from collections import Counter
from pathlib import Path

from gpt2_sizes import SIZES, Files  # bench/ is on the path of a bench script
from server_weights import LLAMA_SRC, convert_gguf

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
WORK = ROOT / "bench" / "work" / "int8"
QUANTIZE = ROOT / "bench" / "work" / "llama" / "bin" / "llama-quantize"
LLAMA_QUANTIZED = ("Q4_0", "Q4_1", "Q4_K_M")  # llama-quantize's types, of the bf16 GGUF
CT2_DTYPES = ("float32", "int8", "int16", "int32", "float16", "bfloat16")  # ctranslate2.specs.model_spec's order


def quantize_gguf(files: Files, kind: str) -> None:
    if not QUANTIZE.exists():
        raise SystemExit(f"{QUANTIZE} missing: run bench/llama_setup.sh first")
    out = files.gguf(kind.lower())
    partial = out.with_suffix(".partial")
    subprocess.run([str(QUANTIZE), str(files.bf16_gguf), str(partial), kind, "2"], check=True)
    partial.replace(out)


def convert_ct2(files: Files) -> None:
    from ctranslate2.converters import TransformersConverter

    partial = files.ct2_dir.with_name(files.ct2_dir.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    TransformersConverter(str(files.hf_dir)).convert(str(partial), quantization="int8", force=True)
    partial.rename(files.ct2_dir)


def gguf_tensors(path: Path) -> list[tuple[str, str, int]]:
    """(name, type, bytes) of every tensor, by the gguf-py of the same llama.cpp tree."""
    sys.path.insert(0, str(LLAMA_SRC / "gguf-py"))
    import gguf

    return [(t.name, t.tensor_type.name, int(t.n_bytes)) for t in gguf.GGUFReader(path).tensors]


def ct2_tensors(path: Path) -> tuple[list[tuple[str, str, int]], dict[str, str]]:
    """(name, type, bytes) of every variable in a CTranslate2 model.bin, and its aliases (name -> name).
    The layout is ctranslate2.specs.model_spec.ModelSpec._serialize's (binary version 6)."""
    with open(path, "rb") as f:

        def read(fmt: str):
            return struct.unpack(fmt, f.read(struct.calcsize(fmt)))[0]

        def string() -> str:
            return f.read(read("H"))[:-1].decode()

        if (version := read("I")) != 6:
            raise ValueError(f"{path}: binary version {version}, this reader knows 6")
        string(), read("I")  # spec name, revision
        tensors = []
        for _ in range(read("I")):
            name = string()
            [read("I") for _ in range(read("B"))]  # shape
            dtype, size = CT2_DTYPES[read("B")], read("I")
            f.seek(size, 1)
            tensors.append((name, dtype, size))
        aliases = dict((string(), string()) for _ in range(read("I")))
    return tensors, aliases


def summary(files: Files) -> dict:
    def by_type(tensors):
        counts = Counter()
        for _, kind, size in tensors:
            counts[kind] += size
        return dict(counts)

    out = {}
    for name in ("q8_0", "bf16", *(k.lower() for k in LLAMA_QUANTIZED)):
        path = files.gguf(name)
        if path.exists():
            tensors = gguf_tensors(path)
            kinds = {n: k for n, k, _ in tensors}
            out[name] = {
                "file": str(path.relative_to(ROOT)),
                "file_bytes": path.stat().st_size,
                "tensor_bytes": sum(size for *_, size in tensors),
                "bytes_by_type": by_type(tensors),
                "token_embd": kinds["token_embd.weight"],
                "output": kinds.get("output.weight", "none: tied to token_embd"),
            }
    model = files.ct2_dir / "model.bin"
    if model.exists():
        tensors, aliases = ct2_tensors(model)
        kinds = {n: k for n, k, _ in tensors}
        projection = "decoder/projection/weight"
        out["ct2_int8"] = {
            "file": str(model.relative_to(ROOT)),
            "file_bytes": model.stat().st_size,
            "tensor_bytes": sum(size for *_, size in tensors),
            "bytes_by_type": by_type(tensors),
            "token_embd": kinds["decoder/embeddings/weight"],
            "output": kinds.get(projection) or f"alias of {aliases[projection]} ({kinds[aliases[projection]]})",
        }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", choices=SIZES, default="124m", help="GPT-2's size (bench/gpt2_sizes.py)")
    files = Files(ap.parse_args().size)
    if not (files.hf_dir / "model.safetensors").exists() or not files.bf16_gguf.exists():
        raise SystemExit(f"{files.hf_dir} or {files.bf16_gguf} missing: run bench/server_weights.py first")
    WORK.mkdir(parents=True, exist_ok=True)
    if not files.gguf("q8_0").exists():
        convert_gguf("q8_0", files.gguf("q8_0"), files.hf_dir)
        print(f"wrote {files.gguf('q8_0')}", flush=True)
    for kind in LLAMA_QUANTIZED:
        if not files.gguf(kind.lower()).exists():
            quantize_gguf(files, kind)
            print(f"wrote {files.gguf(kind.lower())}", flush=True)
    if not (files.ct2_dir / "model.bin").exists():
        convert_ct2(files)
        print(f"wrote {files.ct2_dir}", flush=True)
    files.summary.write_text(json.dumps(summary(files), indent=1))
    print(files.summary.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
