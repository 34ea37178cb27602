"""Weights in: nanoGPT ckpt.pt, safetensors (nanoGPT or GPT-2 layout), or a seed.

Everything is normalised to nanoGPT's state-dict names and to the padded vocab,
so the rest of the pipeline sees a single layout.

The architecture comes from the checkpoint's own record: nanoGPT's model_args, a
Hugging Face config.json beside the safetensors, or the model.* metadata that
export-weights writes. Tensor shapes show every size but n_head; where nothing
records it, the compile refuses and names the --set key to give.
"""

import json
import re
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file

from gpt_aot.model.gpt import GPT, GPTConfig

# GPT-2 checkpoints store these linears as Conv1D, i.e. (in, out): transpose on load.
_CONV1D = re.compile(r"\.(attn\.c_attn|attn\.c_proj|mlp\.c_fc|mlp\.c_proj)\.weight$")
_BUFFERS = re.compile(r"\.attn\.(bias|masked_bias)$")  # causal-mask buffers of old checkpoints


def read_checkpoint(path: Path) -> dict:
    """nanoGPT ckpt.pt as saved (model, model_args, optimizer, iter_num, ...). Never unpickles arbitrary objects."""
    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(ckpt, dict) or "model" not in ckpt or "model_args" not in ckpt:
        raise ValueError(f"{path}: not a nanoGPT checkpoint (expects keys 'model' and 'model_args')")
    return ckpt


def checkpoint_model(ckpt: dict) -> tuple[dict, dict]:
    """(state_dict, model_args) of a read_checkpoint result."""
    state = {k.removeprefix("_orig_mod."): v for k, v in ckpt["model"].items()}
    return state, dict(ckpt["model_args"])


def load_safetensors(path: Path) -> tuple[dict, dict]:
    """safetensors in nanoGPT or GPT-2 (Hugging Face) layout → (state_dict, the architecture it records).
    GPT-2 weights were trained with the tanh-approximated GELU, so that layout's args say gelu="tanh" unless its
    config.json names another; nanoGPT's layout keeps the config's (by default nanoGPT's exact GELU)."""
    raw = load_file(str(path))
    # Conv1D stores c_attn as (C, 3C); nn.Linear as (3C, C).
    hf_layout = any(k.endswith("attn.c_attn.weight") and v.shape[0] * 3 == v.shape[1] for k, v in raw.items())
    state = {}
    for key, value in raw.items():
        if _BUFFERS.search(key):
            continue
        name = key if key.startswith(("transformer.", "lm_head.")) else f"transformer.{key}"
        if hf_layout and _CONV1D.search(name):
            value = value.t().contiguous()
        state[name] = value
    args = infer_args(state)
    if hf_layout:
        args["gelu"] = "tanh"
    recorded = hf_config_args(path) or metadata_args(path)
    for key, value in (recorded or {}).items():
        if key in args and key != "gelu" and args[key] != value:
            raise ValueError(f"{path}: its tensors say {key}={args[key]!r}, its config says {value!r}")
        args[key] = value
    return state, args


def infer_args(state: dict) -> dict:
    """Model shape as far as the tensors tell it: everything but n_head."""
    wte = state["transformer.wte.weight"]
    n_layer = 1 + max(int(m.group(1)) for k in state if (m := re.match(r"transformer\.h\.(\d+)\.", k)))
    return {
        "vocab_size": wte.shape[0],
        "n_embd": wte.shape[1],
        "block_size": state["transformer.wpe.weight"].shape[0],
        "n_layer": n_layer,
        "bias": "transformer.ln_f.bias" in state,
    }


# transformers' GPT2Config defaults, for keys a config.json leaves out.
HF_GPT2_DEFAULTS = dict(
    n_positions=1024,
    n_embd=768,
    n_layer=12,
    n_head=12,
    n_inner=None,
    activation_function="gelu_new",
    layer_norm_epsilon=1e-5,
    scale_attn_weights=True,
    scale_attn_by_inverse_layer_idx=False,
    tie_word_embeddings=True,
)
HF_GELU = {"gelu_new": "tanh", "gelu_pytorch_tanh": "tanh", "gelu": "exact"}
LAYER_NORM_EPS = 1e-5  # gpt.LayerNorm's, as nanoGPT's and GPT-2's


def hf_config_args(weights: Path) -> dict | None:
    """The architecture a Hugging Face config.json beside `weights` records (None without one); refuses what the
    model cannot compute as written, rather than compiling another model."""
    path = weights.parent / "config.json"
    if not path.is_file():
        return None
    config = json.loads(path.read_text())
    if not isinstance(config, dict) or config.get("model_type") != "gpt2":
        kind = config.get("model_type") if isinstance(config, dict) else None
        raise ValueError(f"{path}: model_type {kind!r}: only GPT-2's architecture (model_type 'gpt2') compiles")
    c = {**HF_GPT2_DEFAULTS, **config}
    unsupported = []
    if c["activation_function"] not in HF_GELU:
        unsupported.append(f"activation_function {c['activation_function']!r} (supported: {', '.join(HF_GELU)})")
    if c["n_inner"] not in (None, 4 * c["n_embd"]):
        unsupported.append(f"n_inner {c['n_inner']} (the MLP is 4 x n_embd = {4 * c['n_embd']} wide)")
    if c["layer_norm_epsilon"] != LAYER_NORM_EPS:
        unsupported.append(f"layer_norm_epsilon {c['layer_norm_epsilon']} (the model's is {LAYER_NORM_EPS})")
    if not c["scale_attn_weights"] or c["scale_attn_by_inverse_layer_idx"]:
        unsupported.append("attention scaled other than by 1/sqrt(head size)")
    if not c["tie_word_embeddings"]:
        unsupported.append("untied lm_head (the model ties it to the token embedding)")
    if unsupported:
        raise ValueError(f"{path}: this GPT-2 differs from the model compiled: {'; '.join(unsupported)}")
    args = {"n_embd": c["n_embd"], "n_layer": c["n_layer"], "n_head": c["n_head"], "block_size": c["n_positions"]}
    if "vocab_size" in config:
        args["vocab_size"] = config["vocab_size"]
    return {**args, "gelu": HF_GELU[c["activation_function"]]}


def metadata_args(weights: Path) -> dict | None:
    """The model.* shape that export-weights records in the safetensors metadata (None without it)."""
    with safe_open(str(weights), framework="pt") as f:
        metadata = f.metadata() or {}
    args = {key: int(metadata[f"model.{key}"]) for key in RECORDED_KEYS if f"model.{key}" in metadata}
    return args or None


def build_model(config: GPTConfig, state: dict | None, seed: int, attention: str) -> GPT:
    """A GPT with `state` loaded (vocab rows zero-padded) or initialised from `seed`."""
    model = GPT(config, attention).init_weights(seed)
    if state is None:
        return model
    state = dict(state)
    state.pop("lm_head.weight", None)  # tied to wte
    wte = state["transformer.wte.weight"]
    if wte.shape[0] < config.padded_vocab_size:
        padded = torch.zeros(config.padded_vocab_size, wte.shape[1], dtype=wte.dtype)
        padded[: wte.shape[0]] = wte
        state["transformer.wte.weight"] = padded
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if k != "lm_head.weight"]
    if missing or unexpected:
        raise ValueError(f"weights do not fit the model: missing {missing}, unexpected {unexpected}")
    return model


# What a checkpoint fixes; the rest (dropout, ...) the config may still set, as nanoGPT's resume allows.
SHAPE_KEYS = ("vocab_size", "n_embd", "block_size", "n_layer", "n_head", "bias")
RECORDED_KEYS = ("vocab_size", "n_embd", "block_size", "n_layer", "n_head")  # export-weights' model.* metadata


def load_model(ckpt: Path | None, config_overrides: dict, seed: int, attention: str) -> GPT:
    """Model from a checkpoint/safetensors file (its shape wins; a config that says otherwise is an error) or
    from config + seed. Other keys the file implies (GPT-2 layout: gelu="tanh") give way to the config's."""
    if ckpt is None:
        return build_model(GPTConfig.from_dict(dict(config_overrides)), None, seed, attention)
    ckpt = Path(ckpt)
    if ckpt.suffix == ".safetensors":
        state, args = load_safetensors(ckpt)
        if "n_head" not in args and "n_head" not in config_overrides:
            raise ValueError(
                f"{ckpt} does not record n_head (its tensors cannot show it, and no config.json is beside it): "
                f"give it with --set n_head=N (GPT-2's heads are 64 wide: n_head={max(1, args['n_embd'] // 64)})"
            )
    else:
        state, args = checkpoint_model(read_checkpoint(ckpt))
    merged = dict(config_overrides)
    for key, value in args.items():
        if key in SHAPE_KEYS and key in config_overrides and config_overrides[key] != value:
            raise ValueError(f"{ckpt} has {key}={value!r}, the config asks for {config_overrides[key]!r}")
        if key in SHAPE_KEYS or key not in config_overrides:
            merged[key] = value
    return build_model(GPTConfig.from_dict(merged), state, seed, attention)
