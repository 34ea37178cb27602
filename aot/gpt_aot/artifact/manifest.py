"""manifest.json: what an artifact holds and how to check it before use.

The runtime reads this file first; any change to its meaning bumps
FORMAT_VERSION (runtime/formats/manifest.cpp accepts exactly the versions it knows).
"""

import hashlib
import json
from pathlib import Path

from gpt_aot.base.files import replaced_atomically

FORMAT_NAME = "gpt-aot"
# 2: the KV cache goes into the graphs as per-layer k and v views.
# 3: decode takes one position per row (pos (batch,)), so a batch holds sequences of different lengths.
# 4: decode_one, decode of a single sequence (batch 1) with its own linear form, which the runtime requires.
# 5: withdrawn (decode took its span as a host scalar; slower at long contexts).
# 6: the cache has block_size + 1 positions; decode takes views of its first `span`
#    positions (a dynamic size), so a step reads only the context it attends to.
# 7: every inference graph (prefill, decode, decode_one) names its linear form; a new one, onednn.
# 8: an onednn-form graph's record lists the linear weights ("packed") that the runtime binds
#    packed for oneDNN; the embedding reads its own constant (transformer.wte.weight).
# 9: a CPU target records its ISA level ("native" or an x86-64 psABI level), the compiler's -march/-m flags
#    read back from the packages, and every instruction-set extension (cpuinfo flag) those flags let the
#    code use; the runtime requires all of them, not only the vector ISA's word.
# 10: weights.quantization: an int8 artifact's linear weights are int8 with a per-row scale
#     (<linear>.weight_scale); the int8pack linear form.
# 11: weights.quantization.layout: int8 weights as rows ([rows, cols]) or in blocks of 32 rows
#     ([ceil(rows / 32), cols, 32]); the blocked linear form reads the latter.
# 12: weights.quantization.scheme "int4" (CPU): each linear weight uint8 [ceil(rows / 64) * 64, cols / 2]
#     (layout "blocks64", aten's CPU int4 packing), <linear>.weight_scale_zero [cols / group, padded rows, 2]
#     and <linear>.weight_group_size (int64 scalar, = weights.quantization.group_size); the int4pack form.
#     Later, with no version of its own: an int4pack graph lists its weights as "packed" and the runtime binds
#     copies packed for the host's int4 kernel (blocks64 is only AVX-512's packing); older runtimes bind them
#     as stored, as before.
# 13: training.master_dtype: the adamw graph's tensors (master weights, gradients, moments) are in it (float32),
#     not in the model's dtype; a bf16 model's runtime keeps fp32 masters. Runtimes read 12 as master_dtype = dtype.
#     Later, with no version of its own: graphs.extend (idx (batch, seq), start (batch,), the cache views of `span`
#     positions), several tokens appended to each row's cache. Optional: a runtime without it ignores it, and one
#     with it runs an artifact without it by decode steps.
# 14: "kernels": the graphs call operators of the project's kernel library (kernels/kernels.h) through torch's
#     dispatcher: {"library": "gpt_kernels", "version": N, "operators": ["gpt_kernels::decode_attention", ...]}.
#     The runtime refuses an artifact whose version or operators it lacks. Written only by an artifact that has
#     the section: one without it is 13, which older runtimes read as before.
#     Later, with no version of its own: graphs.mixed (idx (tokens, 1), pos (tokens,), seq (tokens,), last
#     (drawn,), the cache views of `span` positions of every row; logits (drawn, padded vocab)), tokens of any
#     sequences in one forward (decode steps beside prompt pieces). Optional, as graphs.extend.
# 15: an int4 artifact's <linear>.weight_scale_zero is [padded rows / 64, cols / group, 64, 2] (each block's pairs in
#     one run beside its bytes: linear.to_int4_pair_blocks), where 12 to 14 stored [cols / group, padded rows, 2];
#     kernel library version 2 (linear_int4 reads them so). Written only by int4 artifacts: others keep 14 or 13,
#     which older runtimes read as before; the runtime reads int4 artifacts of 15 alone.
# 16: "kv_cache": {"dtype": "int8", ...}: the graphs take an int8 KV cache (n_layer, 2, batch, n_head, block_size + 1,
#     head_dim + 4), each position's head_dim values rounded to int8, then their fp32 scale (kernels/cpu/kv_row_q8.h).
#     Written only by artifacts with such a cache: a runtime that does not know it would hand the graphs a float one.
FORMAT_VERSION = 16
INT4_PAIR_BLOCKS_FORMAT_VERSION = 15
KERNELS_FORMAT_VERSION = 14
WITHOUT_KERNELS_FORMAT_VERSION = 13
MANIFEST = "manifest.json"
SIGNATURE = "manifest.sig"  # written by signing.py after the manifest; never listed in it


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def file_entries(directory: Path) -> dict:
    """sha256 and size of every file in the artifact except the manifest and its signature."""
    entries = {}
    for path in sorted(directory.iterdir()):
        if path.name in (MANIFEST, SIGNATURE) or not path.is_file():
            continue
        entries[path.name] = {"sha256": sha256_file(path), "size": path.stat().st_size}
    return entries


def write_manifest(directory: Path, body: dict) -> dict:
    if "kv_cache" in body:
        version = FORMAT_VERSION
    elif body.get("weights", {}).get("quantization", {}).get("scheme") == "int4":
        version = INT4_PAIR_BLOCKS_FORMAT_VERSION
    else:
        version = KERNELS_FORMAT_VERSION if "kernels" in body else WITHOUT_KERNELS_FORMAT_VERSION
    manifest = {"format": FORMAT_NAME, "format_version": version, **body}
    manifest["files"] = file_entries(directory)
    with replaced_atomically(directory / MANIFEST) as tmp:
        tmp.write_text(json.dumps(manifest, indent=2, ensure_ascii=False))
    return manifest


def read_manifest(directory: Path) -> dict:
    return json.loads((Path(directory) / MANIFEST).read_text())
