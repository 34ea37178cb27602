"""Weights in: nanoGPT ckpt.pt, safetensors (nanoGPT or GPT-2 layout), or a seed.

Everything is normalised to nanoGPT's state-dict names and to the padded vocab,
so the rest of the pipeline sees a single layout.
"""

import re
from pathlib import Path

import torch
from safetensors.torch import load_file

from .model import GPT, GPTConfig

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
    """safetensors in nanoGPT or GPT-2 (Hugging Face) layout → (state_dict, inferred args).
    GPT-2 weights were trained with the tanh-approximated GELU, so that layout's args say gelu="tanh";
    nanoGPT's layout keeps the config's (by default nanoGPT's exact GELU)."""
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
    return state, args


def infer_args(state: dict) -> dict:
    """Model shape as far as the tensors tell it; n_head is not recorded, so the
    GPT-2 convention of 64-wide heads is the default."""
    wte = state["transformer.wte.weight"]
    n_layer = 1 + max(int(m.group(1)) for k in state if (m := re.match(r"transformer\.h\.(\d+)\.", k)))
    return {
        "vocab_size": wte.shape[0],
        "n_embd": wte.shape[1],
        "block_size": state["transformer.wpe.weight"].shape[0],
        "n_layer": n_layer,
        "n_head": max(1, wte.shape[1] // 64),
        "bias": "transformer.ln_f.bias" in state,
    }


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


def load_model(ckpt: Path | None, config_overrides: dict, seed: int, attention: str) -> GPT:
    """Model from a checkpoint/safetensors file (its shape wins; a config that says otherwise is an error) or
    from config + seed. Other keys the file implies (GPT-2 layout: gelu="tanh") give way to the config's."""
    if ckpt is None:
        return build_model(GPTConfig.from_dict(dict(config_overrides)), None, seed, attention)
    ckpt = Path(ckpt)
    if ckpt.suffix == ".safetensors":
        state, args = load_safetensors(ckpt)
        if "n_head" in config_overrides:  # the tensors do not record it: infer_args only guessed
            args["n_head"] = config_overrides["n_head"]
    else:
        state, args = checkpoint_model(read_checkpoint(ckpt))
    merged = dict(config_overrides)
    for key, value in args.items():
        if key in SHAPE_KEYS and key in config_overrides and config_overrides[key] != value:
            raise ValueError(f"{ckpt} has {key}={value!r}, the config asks for {config_overrides[key]!r}")
        if key in SHAPE_KEYS or key not in config_overrides:
            merged[key] = value
    return build_model(GPTConfig.from_dict(merged), state, seed, attention)
