"""An artifact's files besides the compiled graphs: the weights (each tied tensor
once), the golden vector, the tokenizer, and last the manifest that describes
and hashes them all."""

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from gpt_aot.artifact.golden import golden_tolerance, golden_vector
from gpt_aot.artifact.manifest import write_manifest
from gpt_aot.compiler.target import Target
from gpt_aot.model import kv_q8
from gpt_aot.model.gpt import GPT


def weights_for_runtime(model: GPT) -> tuple[dict, dict]:
    """State dict with each tied tensor stored once, plus the alias map."""
    tensors, tied, seen = {}, {}, {}
    for name, tensor in model.state_dict(keep_vars=False).items():
        key = tensor.data_ptr()
        if key in seen:
            tied[name] = seen[key]
            continue
        seen[key] = name
        tensors[name] = tensor.detach().contiguous().cpu()
    return tensors, tied


def kv_cache_section(model: GPT) -> dict:
    """The manifest's record of a KV cache that is not in the activations' dtype (gpt.KV_DTYPES)."""
    c = model.config
    return {
        "dtype": model.kv_dtype,
        "position_bytes": c.head_dim + kv_q8.SCALE_BYTES,
        "layout": "each position's head_dim values rounded to int8 against their largest magnitude / 127, then that "
        "scale as float32",
    }


def write_artifact_files(
    directory: Path,
    model: GPT,
    target: Target,
    name: str,
    tokenizer: dict,
    attention: dict,
    graphs: dict,
    training: dict | None,
    quantization: dict | None = None,
    kernels: dict | None = None,
) -> dict:
    """Write weights, golden vector and tokenizer into `directory`, which already
    holds the graphs' packages, then the manifest; return the manifest.
    `attention` is the inference attention choice, `graphs` the graphs'
    specs, `training` the training section (None without training graphs),
    `quantization` the weights' (None when they are in the artifact's dtype),
    `kernels` the kernel library the graphs call (None when they call none).
    The golden vector comes from the model as it is (quantized, if it is), its
    prefill with the prefill's attention kernel."""
    tensors, tied = weights_for_runtime(model)
    save_file(tensors, str(directory / "weights.safetensors"))
    golden = golden_vector(model, attention["backend"])
    save_file(golden, str(directory / "golden.safetensors"))
    (directory / "tokenizer.json").write_text(json.dumps(tokenizer, ensure_ascii=False))
    forms = tuple(dict.fromkeys(spec["linear"]["form"] for spec in graphs.values() if "linear" in spec))
    atol, rtol = golden_tolerance(model, golden, target.dtype, forms, attention["backend"])
    quantized = {"quantization": quantization} if quantization else {}
    c = model.config
    return write_manifest(
        directory,
        {
            "name": name,
            "torch_version": torch.__version__,
            "target": target.to_manifest(),
            "dtype": str(target.dtype).removeprefix("torch."),
            "attention": attention,
            "model": {**c.to_dict(), "padded_vocab_size": c.padded_vocab_size},
            "weights": {"file": "weights.safetensors", "tied": tied, **quantized},
            "graphs": graphs,
            "tokenizer": {"file": "tokenizer.json", "kind": tokenizer["kind"]},
            "golden": {"file": "golden.safetensors", "atol": atol, "rtol": rtol},
            **({"kv_cache": kv_cache_section(model)} if model.kv_dtype else {}),
            **({"training": training} if training else {}),
            **({"kernels": kernels} if kernels else {}),
        },
    )
