"""Weights in: nanoGPT ckpt.pt, safetensors in nanoGPT and GPT-2 layouts."""

import pickle

import pytest
import torch
from safetensors.torch import save_file

from gpt_aot.importers.weights import load_model
from gpt_aot.model.gpt import GPT, GPTConfig

ARGS = dict(block_size=16, vocab_size=65, n_layer=2, n_head=2, n_embd=16, bias=True, dropout=0.0)


def source_model(gelu: str = "exact"):
    return GPT(GPTConfig(**ARGS, gelu=gelu)).init_weights(5).eval()


def logits(m, idx):
    with torch.no_grad():
        return m(idx)[0][..., : ARGS["vocab_size"]]


def nanogpt_state(m):
    """State dict as nanoGPT saves it: unpadded vocab rows, compiled-model prefix."""
    state = {}
    for k, v in m.state_dict().items():
        if k in ("transformer.wte.weight", "lm_head.weight"):
            v = v[: ARGS["vocab_size"]]
        state[f"_orig_mod.{k}"] = v.clone()
    return state


def test_nanogpt_checkpoint_loads_with_prefix_stripped_and_vocab_padded(tmp_path):
    src = source_model()
    path = tmp_path / "ckpt.pt"
    torch.save(
        {
            "model": nanogpt_state(src),
            "model_args": ARGS,
            "iter_num": 100,
            "best_val_loss": 1.5,
            "config": {"dataset": "shakespeare_char"},
        },
        path,
    )
    loaded = load_model(path, {}, seed=0, attention="math").eval()
    assert loaded.config.vocab_size == 65 and loaded.config.padded_vocab_size == 128
    assert loaded.config.gelu == "exact"
    idx = torch.randint(0, 65, (2, 9))
    torch.testing.assert_close(logits(loaded, idx), logits(src, idx), atol=0, rtol=0)


class NotATensor:
    pass


def test_checkpoint_with_arbitrary_objects_is_refused(tmp_path):
    path = tmp_path / "evil.pt"
    torch.save({"model": {}, "model_args": ARGS, "payload": NotATensor()}, path)
    with pytest.raises(pickle.UnpicklingError):
        load_model(path, {}, seed=0, attention="math")


def test_gpt2_layout_safetensors_loads(tmp_path):
    """Hugging Face GPT-2 files: no 'transformer.' prefix, Conv1D (in, out) weights, mask buffers;
    GPT-2's tanh-approximated GELU."""
    src = source_model(gelu="tanh")
    tensors = {}
    for k, v in src.state_dict().items():
        if k == "lm_head.weight":
            continue
        if k == "transformer.wte.weight":
            v = v[: ARGS["vocab_size"]]
        if any(k.endswith(s) for s in ("c_attn.weight", "c_proj.weight", "c_fc.weight")):
            v = v.t()
        tensors[k.removeprefix("transformer.")] = v.contiguous()
    for i in range(ARGS["n_layer"]):
        tensors[f"h.{i}.attn.bias"] = torch.ones(1, 1, 16, 16)
    path = tmp_path / "model.safetensors"
    save_file(tensors, str(path))
    loaded = load_model(path, {"n_head": 2}, seed=0, attention="math").eval()
    assert loaded.config.n_layer == 2 and loaded.config.block_size == 16 and loaded.config.bias
    assert loaded.config.gelu == "tanh"
    idx = torch.randint(0, 65, (1, 12))
    torch.testing.assert_close(logits(loaded, idx), logits(src, idx), atol=1e-6, rtol=1e-6)


def test_nanogpt_layout_safetensors_loads(tmp_path):
    src = source_model()
    state = {k.removeprefix("_orig_mod."): v for k, v in nanogpt_state(src).items() if "lm_head" not in k}
    path = tmp_path / "model.safetensors"
    save_file(state, str(path))
    loaded = load_model(path, {"n_head": 2}, seed=0, attention="math").eval()
    idx = torch.randint(0, 65, (1, 12))
    torch.testing.assert_close(logits(loaded, idx), logits(src, idx), atol=0, rtol=0)


def test_weights_that_do_not_fit_the_config_are_refused(tmp_path):
    src = source_model()
    state = {k.removeprefix("_orig_mod."): v for k, v in nanogpt_state(src).items()}
    state["transformer.h.0.extra.weight"] = torch.zeros(3)
    path = tmp_path / "ckpt.pt"
    torch.save({"model": state, "model_args": ARGS}, path)
    with pytest.raises(ValueError, match="unexpected"):
        load_model(path, {}, seed=0, attention="math")


def test_a_checkpoint_fixes_the_shape_and_the_config_the_rest(tmp_path):
    src = source_model()
    path = tmp_path / "ckpt.pt"
    torch.save({"model": nanogpt_state(src), "model_args": {**ARGS, "dropout": 0.2}}, path)
    # dropout is the config's to set (as nanoGPT's resume lets it), the shape keys agree
    loaded = load_model(path, {"dropout": 0.0, "n_layer": 2, "vocab_size": 65}, seed=0, attention="math")
    assert loaded.config.dropout == 0.0
    assert load_model(path, {}, seed=0, attention="math").config.dropout == 0.2
    # a shape the checkpoint disagrees with is an error, not silently the checkpoint's
    for key, value in (("n_head", 4), ("vocab_size", 96), ("bias", False), ("block_size", 32)):
        with pytest.raises(ValueError, match=f"has {key}="):
            load_model(path, {key: value}, seed=0, attention="math")


def hf_gpt2(directory, **config):
    """A random transformers GPT-2 saved as save_pretrained writes it (model.safetensors + config.json)."""
    import transformers

    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(**config)).eval()
    model.save_pretrained(directory, safe_serialization=True)
    return model


def test_hf_checkpoint_with_heads_not_64_wide_compiles_as_its_config_says(tmp_path):
    """The issue's file: GPT2Config(n_layer=2, n_embd=128, n_head=4). The tensors alone suggest n_head 2
    (128 / 64); config.json beside them says 4, and only 4 gives transformers' logits."""
    hf = hf_gpt2(tmp_path, n_layer=2, n_embd=128, n_head=4, n_positions=32, vocab_size=96)
    loaded = load_model(tmp_path / "model.safetensors", {}, seed=0, attention="math").eval()
    assert (loaded.config.n_head, loaded.config.n_layer, loaded.config.n_embd) == (4, 2, 128)
    assert loaded.config.gelu == "tanh" and loaded.config.block_size == 32 and loaded.config.vocab_size == 96
    idx = torch.randint(0, 96, (2, 20), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want = hf(idx).logits
        got = loaded(idx)[0][..., :96]
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    # a --set that contradicts the file is an error, one that agrees is fine
    with pytest.raises(ValueError, match="has n_head=4, the config asks for 2"):
        load_model(tmp_path / "model.safetensors", {"n_head": 2}, seed=0, attention="math")
    assert load_model(tmp_path / "model.safetensors", {"n_head": 4}, seed=0, attention="math").config.n_head == 4


def test_safetensors_that_do_not_record_n_head_are_refused_naming_the_key(tmp_path):
    hf_gpt2(tmp_path, n_layer=2, n_embd=128, n_head=4, n_positions=32, vocab_size=96)
    (tmp_path / "config.json").unlink()
    with pytest.raises(ValueError, match=r"does not record n_head .* --set n_head=N"):
        load_model(tmp_path / "model.safetensors", {}, seed=0, attention="math")
    assert load_model(tmp_path / "model.safetensors", {"n_head": 4}, seed=0, attention="math").config.n_head == 4


@pytest.mark.parametrize(
    "change, message",
    [
        ({"activation_function": "relu"}, "activation_function 'relu'"),
        ({"n_inner": 100}, "n_inner 100"),
        ({"layer_norm_epsilon": 1e-6}, "layer_norm_epsilon"),
        ({"scale_attn_by_inverse_layer_idx": True}, "attention scaled"),
        ({"tie_word_embeddings": False}, "untied lm_head"),
        ({"model_type": "llama"}, "model_type 'llama'"),
        ({"n_layer": 3}, "tensors say n_layer=2, its config says 3"),
    ],
)
def test_a_gpt2_config_the_model_cannot_compute_is_refused(tmp_path, change, message):
    import json

    hf_gpt2(tmp_path, n_layer=2, n_embd=64, n_head=4, n_positions=32, vocab_size=96)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, **change}))
    with pytest.raises(ValueError, match=message):
        load_model(tmp_path / "model.safetensors", {}, seed=0, attention="math")
