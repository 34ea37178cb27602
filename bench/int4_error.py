"""How far each 4-bit scheme moves the weights: ours (a scale and a zero per group of 32 or 64 inputs, bf16) and
llama.cpp's Q4_0 (a scale per 32), Q4_1 (a scale and a minimum per 32) and Q4_K_M, on the same shared weights.

    .venv/bin/python bench/int4_error.py [--size 355m] [--out DIR]

The weights are bench/work/server/hf-gpt2-SIZE/model.safetensors (bench/server_weights.py), the very bits every
engine in bench/int8_bench.py starts from; llama.cpp's are its GGUFs (bench/int8_weights.py) read back and
dequantised by the gguf-py of the same llama.cpp tree, ours quantised by model/quantize.py as `compile --quantize
int4 --group-size G` does. For the blocks' matrices (attention and MLP; the embedding, also the output matrix, is
reported apart: llama-quantize keeps it Q6_K) each scheme's relative error sqrt(sum (w' - w)^2 / sum w^2) and its
bits a weight. Output: results.json and a table on stdout (and results.md in --out).
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "aot"))

from gpt2_sizes import SIZES, Files, config  # noqa: E402
from server_weights import LLAMA_SRC  # noqa: E402

from gpt_aot.model.quantize import INT4_ZERO, quantize_groups  # noqa: E402

# Hugging Face GPT-2's matrices (Conv1D: (inputs, outputs)) and their GGUF names, per block.
BLOCK_MATRICES = {"attn.c_attn": "attn_qkv", "attn.c_proj": "attn_output", "mlp.c_fc": "ffn_up",
                  "mlp.c_proj": "ffn_down"}  # fmt: skip
LLAMA_KINDS = ("q4_0", "q4_1", "q4_k_m")


def reference(files: Files) -> dict[str, torch.Tensor]:
    """Each matrix as (outputs, inputs) fp32, keyed by its GGUF name."""
    state = load_file(str(files.hf_dir / "model.safetensors"))
    out = {"token_embd.weight": state["transformer.wte.weight"].float()}
    for layer in range(config(files.size)["n_layer"]):
        for hf, gguf_name in BLOCK_MATRICES.items():
            out[f"blk.{layer}.{gguf_name}.weight"] = state[f"transformer.h.{layer}.{hf}.weight"].float().t()
    return out


def ours(weight: torch.Tensor, group: int) -> torch.Tensor:
    q, scale_zero = quantize_groups(weight, group, torch.bfloat16)
    pairs = scale_zero.float().repeat_interleave(group, dim=0).transpose(0, 1)  # (rows, cols, 2)
    return (q.float() - INT4_ZERO) * pairs[..., 0] + pairs[..., 1]


def llama(files: Files, kind: str, wanted: set[str]) -> dict[str, tuple[np.ndarray, str, int]]:
    sys.path.insert(0, str(LLAMA_SRC / "gguf-py"))
    import gguf

    found = {}
    for t in gguf.GGUFReader(files.gguf(kind)).tensors:
        if t.name in wanted:
            values = gguf.quants.dequantize(t.data, t.tensor_type)
            found[t.name] = (values.reshape(int(t.shape[1]), int(t.shape[0])), t.tensor_type.name, int(t.n_bytes))
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", choices=SIZES, default="355m")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    files = Files(args.size)
    ref = reference(files)
    parts = {"blocks": [n for n in ref if n.startswith("blk.")], "embedding": ["token_embd.weight"]}
    result = {"size": args.size, "schemes": {}}
    for group in (32, 64):
        per = {}
        for part, names in parts.items():
            err = sum(float((ours(ref[n], group) - ref[n]).pow(2).sum()) for n in names)
            norm = sum(float(ref[n].pow(2).sum()) for n in names)
            elements = sum(ref[n].numel() for n in names)
            per[part] = {"relative_error": (err / norm) ** 0.5, "bits_per_weight": 4 + 2 * 16 / group,
                         "types": ["int4 + bf16 scale, zero"], "elements": elements}  # fmt: skip
        result["schemes"][f"ours int4 g{group}"] = per
    for kind in LLAMA_KINDS:
        if not files.gguf(kind).exists():
            print(f"skipped {kind}: {files.gguf(kind)} missing (bench/int8_weights.py)", file=sys.stderr)
            continue
        tensors, per = llama(files, kind, set(ref)), {}
        for part, names in parts.items():
            err = sum(float(((torch.from_numpy(tensors[n][0]).float() - ref[n]) ** 2).sum()) for n in names)
            norm = sum(float(ref[n].pow(2).sum()) for n in names)
            elements = sum(ref[n].numel() for n in names)
            per[part] = {"relative_error": (err / norm) ** 0.5,
                         "bits_per_weight": 8 * sum(tensors[n][2] for n in names) / elements,
                         "types": sorted({tensors[n][1] for n in names}), "elements": elements}  # fmt: skip
        result["schemes"][f"llama.cpp {kind.upper()}"] = per
    lines = [f"# 4-bit weights' error, GPT-2 {args.size.upper()} (bench/int4_error.py)", "",
             "| scheme | blocks: relative error | bits a weight | embedding / output: relative error | bits | types |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for name, per in result["schemes"].items():
        b, e = per["blocks"], per["embedding"]
        types = ", ".join(sorted(set(b["types"]) | set(e["types"])))
        lines.append(f"| {name} | {b['relative_error']:.4f} | {b['bits_per_weight']:.2f} | "
                     f"{e['relative_error']:.4f} | {e['bits_per_weight']:.2f} | {types} |")  # fmt: skip
    print("\n".join(lines))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "int4_error.json").write_text(json.dumps(result, indent=1) + "\n")
        (args.out / "int4_error.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
