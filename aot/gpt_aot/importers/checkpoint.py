"""Runtime checkpoints from and to nanoGPT's formats.

A runtime checkpoint (runtime/train/trainer_checkpoint.cpp) is one safetensors file:
param.<name>, exp_avg.<name>, exp_avg_sq.<name> for each name in the artifact's
training.param_names, in its training.master_dtype (fp32: a bf16 model's master weights
and moments), rng.cpu (and rng.cuda from a CUDA trainer: the trainer's generators), and
string metadata (format, iteration, model shape).
"""

from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from gpt_aot.artifact.manifest import read_manifest
from gpt_aot.base.files import replaced_atomically
from gpt_aot.importers.weights import RECORDED_KEYS, SHAPE_KEYS, checkpoint_model, read_checkpoint

FORMAT = "gpt-aot-checkpoint"
# 2: param/exp_avg/exp_avg_sq in the artifact's training.master_dtype (1: in the model's dtype).
FORMAT_VERSION = "2"
TIED = {"transformer.wte.weight": "lm_head.weight"}  # nanoGPT's name -> the graphs' name


def _padded(tensor: torch.Tensor, rows: int) -> torch.Tensor:
    """The embedding with zero rows up to the padded vocabulary (nanoGPT char models are unpadded)."""
    if tensor.shape[0] < rows:
        out = torch.zeros(rows, tensor.shape[1], dtype=tensor.dtype)
        out[: tensor.shape[0]] = tensor
        return out
    return tensor


def import_nanogpt(ckpt_path: Path, artifact_dir: Path, out: Path) -> int:
    """nanoGPT ckpt.pt (weights, and AdamW state where present) -> runtime checkpoint.
    Returns the iteration it resumes at."""
    manifest = read_manifest(artifact_dir)
    training = manifest.get("training")
    if training is None:
        raise ValueError(f"{artifact_dir} has no training graphs: compile it with --train")
    m = manifest["model"]
    # nanoGPT keeps fp32 weights and moments under bf16 autocast: kept so (artifacts of format 12: the model's dtype)
    dtype = getattr(torch, training.get("master_dtype", manifest["dtype"]))
    raw = read_checkpoint(ckpt_path)
    state, args = checkpoint_model(raw)
    for key in SHAPE_KEYS:  # tensor shapes alone do not show n_head
        if key in args and args[key] != m[key]:
            raise ValueError(f"{ckpt_path} has {key}={args[key]!r}, {artifact_dir} was compiled with {m[key]!r}")
    # nanoGPT trains with the exact GELU; weights of one activation are off under the other.
    gelu, compiled_gelu = args.get("gelu", "exact"), m.get("gelu", "exact")  # older manifests: nanoGPT's
    if gelu != compiled_gelu:
        raise ValueError(
            f"{ckpt_path} was trained with the {gelu} GELU, {artifact_dir} was compiled with the {compiled_gelu} "
            f"one: compile it with --set gelu={gelu}"
        )
    # nanoGPT's configure_optimizers: named_parameters() (tied tensor once, as wte),
    # >= 2-D tensors in the decay group first; optimizer state is indexed in that order.
    names = [n for n in state if n != "lm_head.weight" and not n.endswith((".attn.bias", ".attn.masked_bias"))]
    order = [n for n in names if state[n].dim() >= 2] + [n for n in names if state[n].dim() < 2]
    opt_state = raw.get("optimizer", {}).get("state", {})

    tensors = {}
    for index, name in enumerate(order):
        ours = TIED.get(name, name)
        if ours not in training["param_names"]:
            raise ValueError(f"{ckpt_path}: parameter {name} is not in the artifact")
        moments = opt_state.get(index, {})
        for prefix, value in (
            ("param", state[name]),
            ("exp_avg", moments.get("exp_avg", torch.zeros_like(state[name]))),
            ("exp_avg_sq", moments.get("exp_avg_sq", torch.zeros_like(state[name]))),
        ):
            if name in TIED:
                value = _padded(value, m["padded_vocab_size"])
            tensors[f"{prefix}.{ours}"] = value.to(dtype).contiguous()
    missing = set(training["param_names"]) - {k.split(".", 1)[1] for k in tensors if k.startswith("param.")}
    if missing:
        raise ValueError(f"{ckpt_path} lacks {sorted(missing)}")
    tensors["rng.cpu"] = torch.get_rng_state()
    iteration = int(raw.get("iter_num", 0))
    metadata = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "iteration": str(iteration),
        "model.name": manifest["name"],
        "model.dtype": manifest["dtype"],
        **{f"model.{k}": str(m[k]) for k in ("n_layer", "n_head", "n_embd", "block_size", "vocab_size")},
    }
    with replaced_atomically(out) as tmp:
        save_file(tensors, str(tmp), metadata=metadata)
    return iteration


def export_weights(checkpoint: Path, out: Path, vocab_size: int | None = None) -> None:
    """Runtime checkpoint -> safetensors in nanoGPT's state-dict layout (wte and lm_head both present)."""
    tensors = load_file(str(checkpoint))
    with safe_open(str(checkpoint), framework="pt") as f:
        recorded = f.metadata() or {}
    weights = {}
    for key, value in tensors.items():
        if not key.startswith("param."):
            continue
        name = key.removeprefix("param.")
        if vocab_size and name == "lm_head.weight":
            value = value[:vocab_size]
        weights[name] = value.contiguous()
    weights["transformer.wte.weight"] = weights["lm_head.weight"].clone()
    # The shape the tensors cannot show (n_head), for a compile of this file (weights.metadata_args).
    metadata = {f"model.{k}": recorded[f"model.{k}"] for k in RECORDED_KEYS if f"model.{k}" in recorded}
    metadata["model.vocab_size"] = str(weights["lm_head.weight"].shape[0])
    with replaced_atomically(out) as tmp:
        save_file(weights, str(tmp), metadata=metadata)
