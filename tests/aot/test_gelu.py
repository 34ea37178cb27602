"""The MLP's GELU: GPT-2 weights in Hugging Face's layout run with GPT-2's tanh approximation
(transformers' gelu_new), nanoGPT's weights with the exact GELU nanoGPT trains with; a config
key says otherwise, and the manifest records which."""

import json

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

from gpt_aot.artifact.loader import ArtifactGraphs
from gpt_aot.importers.checkpoint import import_nanogpt
from gpt_aot.importers.weights import load_model
from gpt_aot.model.config import resolve_config
from gpt_aot.model.gpt import GELU_FORMS, GPT, GPTConfig

transformers = pytest.importorskip("transformers")

# Weights large enough that the two GELUs' difference shows in the logits (about 8e-4 here), small
# enough that float32's own reordering noise (about 1e-6) stays well under the tolerance.
HF = dict(n_layer=2, n_head=2, n_embd=64, n_positions=64, vocab_size=100, initializer_range=0.1)
HF_TOL = 1e-5
NANOGPT = dict(block_size=32, vocab_size=65, n_layer=2, n_head=2, n_embd=32, bias=True, dropout=0.0)
NANOGPT_TOL = 1e-6


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().max().item()


@pytest.fixture(scope="module")
def hf_gpt2(tmp_path_factory, fixtures):
    """A random transformers GPT-2 (biases and layer norms random too) saved as model.safetensors."""
    directory = tmp_path_factory.mktemp("hf-gpt2")
    model = fixtures.random_hf_gpt2(HF, directory)
    assert model.config.activation_function == "gelu_new"
    return model, directory / "model.safetensors"


def hf_logits(model, idx: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(idx).logits


def our_logits(model: GPT, idx: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model.eval()(idx)[0][..., : model.config.vocab_size]


def test_hf_gpt2_import_runs_the_tanh_gelu_and_matches_transformers(hf_gpt2):
    hf, path = hf_gpt2
    idx = torch.randint(0, HF["vocab_size"], (2, 40), generator=torch.Generator().manual_seed(2))
    expected = hf_logits(hf, idx)
    imported = load_model(path, {"n_head": 2}, seed=0, attention="math")
    assert imported.config.gelu == "tanh"
    tanh_diff = max_diff(our_logits(imported, idx), expected)
    assert tanh_diff <= HF_TOL, f"tanh GELU: max abs difference {tanh_diff:.3g} from transformers"
    # The comparison sees the activation: nanoGPT's exact GELU on the same weights misses.
    exact = load_model(path, {"n_head": 2, "gelu": "exact"}, seed=0, attention="math")
    assert exact.config.gelu == "exact"
    exact_diff = max_diff(our_logits(exact, idx), expected)
    assert exact_diff > 10 * HF_TOL, f"exact GELU: max abs difference {exact_diff:.3g} from transformers"


def nanogpt_forward(state: dict, n_head: int, idx: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    """nanoGPT's GPT.forward (model.py) written out over its state dict: LayerNorm (eps 1e-5),
    causal attention, nn.GELU(), lm_head tied to wte; logits at every position."""

    def ln(x, p):
        return F.layer_norm(x, (x.shape[-1],), state[f"{p}.weight"], state.get(f"{p}.bias"), 1e-5)

    def lin(x, p):
        return F.linear(x, state[f"{p}.weight"], state.get(f"{p}.bias"))

    B, T = idx.shape
    wte = state["transformer.wte.weight"]
    C = wte.shape[1]
    x = wte[idx] + state["transformer.wpe.weight"][:T]
    for i in range(len({k.split(".")[2] for k in state if k.startswith("transformer.h.")})):
        h = f"transformer.h.{i}"
        qkv = lin(ln(x, f"{h}.ln_1"), f"{h}.attn.c_attn").split(C, dim=2)
        q, k, v = (t.view(B, T, n_head, C // n_head).transpose(1, 2) for t in qkv)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, C)
        x = x + lin(y, f"{h}.attn.c_proj")
        x = x + lin(F.gelu(lin(ln(x, f"{h}.ln_2"), f"{h}.mlp.c_fc"), approximate=approximate), f"{h}.mlp.c_proj")
    return F.linear(ln(x, "transformer.ln_f"), wte)


def nanogpt_state(scale: float = 0.05) -> dict:
    """A nanoGPT state dict as train.py saves it (unpadded vocab, lm_head tied), random at `scale`."""
    gen = torch.Generator().manual_seed(3)
    state = {}
    for name, tensor in GPT(GPTConfig(**NANOGPT)).state_dict().items():
        shape = (NANOGPT["vocab_size"], tensor.shape[1]) if name.endswith("wte.weight") else tensor.shape
        value = torch.randn(shape, generator=gen) * scale
        state[name] = value + 1 if ".ln_" in name and name.endswith("weight") else value
    state["lm_head.weight"] = state["transformer.wte.weight"]
    return state


def test_nanogpt_checkpoint_runs_the_exact_gelu_and_matches_nanogpt(tmp_path):
    state = nanogpt_state()
    path = tmp_path / "ckpt.pt"
    torch.save({"model": {f"_orig_mod.{k}": v for k, v in state.items()}, "model_args": NANOGPT}, path)
    idx = torch.randint(0, NANOGPT["vocab_size"], (2, 32), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        expected = nanogpt_forward(state, NANOGPT["n_head"], idx)
        tanh_expected = nanogpt_forward(state, NANOGPT["n_head"], idx, approximate="tanh")
    loaded = load_model(path, {}, seed=0, attention="math")
    assert loaded.config.gelu == "exact"
    diff = max_diff(our_logits(loaded, idx), expected)
    assert diff <= NANOGPT_TOL, f"max abs difference {diff:.3g} from nanoGPT's forward"
    assert max_diff(our_logits(loaded, idx), tanh_expected) > 10 * NANOGPT_TOL  # the comparison sees the GELU
    # nanoGPT's layout in safetensors: the exact GELU too.
    save_file({k: v.contiguous() for k, v in state.items() if k != "lm_head.weight"}, str(tmp_path / "m.safetensors"))
    loaded = load_model(tmp_path / "m.safetensors", {"n_head": 2}, seed=0, attention="math")
    assert loaded.config.gelu == "exact"
    assert max_diff(our_logits(loaded, idx), expected) <= NANOGPT_TOL


def test_an_explicit_gelu_wins_over_what_the_weights_imply(tmp_path, hf_gpt2):
    _, hf_path = hf_gpt2
    ckpt = tmp_path / "ckpt.pt"
    torch.save({"model": nanogpt_state(), "model_args": NANOGPT}, ckpt)
    for path, implied in ((hf_path, "tanh"), (ckpt, "exact")):
        overrides = {"n_head": 2}
        assert load_model(path, overrides, seed=0, attention="math").config.gelu == implied
        for gelu in ("exact", "tanh"):
            model = load_model(path, {**overrides, **resolve_config(None, [f"gelu={gelu}"])}, 0, "math")
            assert model.config.gelu == gelu and model.transformer.h[0].mlp.gelu.approximate == GELU_FORMS[gelu]
    # The gpt2 preset is GPT-2's shape; without GPT-2's weights it is nanoGPT's model.
    assert GPTConfig.from_dict(resolve_config("gpt2", [])).gelu == "exact"
    assert GPTConfig.from_dict(resolve_config("gpt2", ["gelu=tanh"])).gelu == "tanh"
    with pytest.raises(ValueError, match="gelu must be one of exact, tanh"):
        GPTConfig(gelu="erf")


def test_import_ckpt_refuses_an_artifact_compiled_with_the_other_gelu(tmp_path):
    artifact = tmp_path / "artifact"
    artifact.mkdir()
    model = {**NANOGPT, "gelu": "tanh", "padded_vocab_size": 128}
    manifest = {"name": "m", "dtype": "float32", "model": model, "training": {"param_names": []}}
    (artifact / "manifest.json").write_text(json.dumps(manifest))
    torch.save({"model": nanogpt_state(), "model_args": NANOGPT}, tmp_path / "ckpt.pt")
    with pytest.raises(ValueError, match="trained with the exact GELU.*--set gelu=exact"):
        import_nanogpt(tmp_path / "ckpt.pt", artifact, tmp_path / "out.ckpt")


def test_a_compiled_hf_gpt2_artifact_records_and_runs_the_tanh_gelu(artifacts, fixtures):
    # tiny-bpe: the fixtures' random transformers GPT-2, compiled through `gpt_aot compile --ckpt`.
    hf = transformers.GPT2LMHeadModel.from_pretrained(artifacts / "hf-gpt2").eval()
    directory = artifacts / "tiny-bpe" / "cpu"
    graphs = ArtifactGraphs(directory)
    assert graphs.manifest["model"]["gelu"] == "tanh"
    golden = load_file(str(directory / "golden.safetensors"))
    tokens, vocab = golden["tokens"], fixtures.HF_GPT2["vocab_size"]
    n = tokens.shape[1]
    both = torch.cat([tokens, golden["decode_token"]], dim=1)
    expected = hf_logits(hf, both)
    expected_prefill, expected_decode = expected[:, n - 1], expected[:, n]
    # The golden vector (eager, what the runtime's verify reproduces) and the compiled graphs agree with transformers.
    assert max_diff(golden["prefill_logits"][:, :vocab], expected_prefill) <= HF_TOL
    assert max_diff(golden["decode_logits"][:, :vocab], expected_decode) <= HF_TOL
    kv = graphs.new_kv_cache(1)
    with torch.no_grad():
        prefill = graphs.prefill(tokens, kv)
        decode = graphs.decode(golden["decode_token"], torch.tensor([n]), kv)
    assert max_diff(prefill[:, :vocab], expected_prefill) <= HF_TOL
    assert max_diff(decode[:, :vocab], expected_decode) <= HF_TOL
