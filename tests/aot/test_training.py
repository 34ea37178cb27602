"""Compiled training graphs against eager PyTorch: gradients, eval loss, AdamW."""

import json
import zipfile

import pytest
import torch

from gpt_aot.compiler import packages, pipeline, training
from gpt_aot.compiler.graphs import EntryModule
from gpt_aot.compiler.target import resolve

TOL = 1e-5
CPU = resolve("cpu", "auto", "fp32")


@pytest.fixture(scope="module")
def train_dir(artifacts):
    return artifacts / "tiny-math" / "cpu"


@pytest.fixture(scope="module")
def flash_train_dir(tmp_path_factory, fixtures):
    """train_step alone, with flash attention (its inference graphs and the others are tiny-math's kind)."""
    path = tmp_path_factory.mktemp("flash-train")
    t = pipeline.compile_checked_train_step(
        fixtures.tiny_model("flash"), CPU, path, "flash", 4, pipeline.Progress(True)
    )
    (path / "training.json").write_text(json.dumps(t))
    return path


@pytest.fixture(scope="module")
def manifest(train_dir):
    return json.loads((train_dir / "manifest.json").read_text())


def load(train_dir, graph, model):
    package = torch._inductor.aoti_load_package(str(train_dir / f"{graph}.pt2"))
    params = dict(EntryModule(model).named_parameters())
    package.load_constants(
        {n: params[n].detach() for n in package.get_constant_fqns()}, check_full_update=True, user_managed=True
    )
    return package


def test_manifest_describes_the_training_graphs(manifest, fixtures):
    t = manifest["training"]
    model = fixtures.tiny_model("math")
    assert t["param_names"] == training.param_names(model)
    assert "lm_head.weight" in t["param_names"] and "transformer.wte.weight" not in t["param_names"]
    assert t["weight_decay_params"] == [n for n, p in EntryModule(model).named_parameters() if p.dim() >= 2]
    assert t["optimizer"] == {"kind": "adamw", **fixtures.OPTIMIZER.to_dict()}
    assert t["master_dtype"] == "float32" and t["adamw"]["outputs"][0]["dtype"] == "float32"
    assert t["verified"] is True and t["max_grad_error"] < 1e-4
    assert t["attention_choice"] == {"backend": "math", "selected_by": "user"}
    for graph in ("train_step", "eval_loss", "adamw"):
        assert t[graph]["file"] in manifest["files"]


@pytest.mark.parametrize("batch,seq", [(1, 2), (3, 17), (2, 32)])
@pytest.mark.parametrize("attention", ["math", "flash"])
def test_compiled_train_step_gives_eager_loss_and_every_gradient(request, fixtures, attention, batch, seq):
    directory = request.getfixturevalue("train_dir" if attention == "math" else "flash_train_dir")
    model = fixtures.tiny_model(attention).train()
    package = load(directory, "train_step", model)
    gen = torch.Generator().manual_seed(batch * 100 + seq)
    x = torch.randint(0, fixtures.CONFIG.vocab_size, (batch, seq), generator=gen)
    y = torch.randint(0, fixtures.CONFIG.vocab_size, (batch, seq), generator=gen)
    y[0, 0] = -1  # ignored target
    out = package.loader.run([x, y])
    _, loss = model(x, y)
    loss.backward()
    params = dict(EntryModule(model).named_parameters())
    torch.testing.assert_close(out[0], loss.detach(), atol=TOL, rtol=TOL)
    assert len(out) == 1 + len(params)
    for name, grad in zip(training.param_names(model), out[1:], strict=True):
        torch.testing.assert_close(grad, params[name].grad, atol=TOL, rtol=TOL, msg=name)


def test_compiled_eval_loss_equals_eager(train_dir, fixtures):
    model = fixtures.tiny_model("math")
    package = load(train_dir, "eval_loss", model)
    x = torch.randint(0, fixtures.CONFIG.vocab_size, (4, 20))
    with torch.no_grad():
        torch.testing.assert_close(package.loader.run([x, x.roll(1, 1)])[0], model(x, x.roll(1, 1))[1])


def test_a_bf16_artifact_trains_fp32_masters_from_bf16_gradients(artifacts):
    """nanoGPT's bf16 autocast: bf16 compute, fp32 weights and moments. The runtime keeps the masters."""
    manifest = json.loads((artifacts / "tiny-bf16-train" / "cpu" / "manifest.json").read_text())
    t = manifest["training"]
    assert manifest["dtype"] == "bfloat16" and t["master_dtype"] == "float32"
    assert {o["dtype"] for o in t["train_step"]["outputs"]} == {"bfloat16"}
    assert t["adamw"]["outputs"] == [{"name": "grad_norm", "dtype": "float32", "shape": []}]
    assert t["verified"]


@pytest.mark.parametrize("artifact", ["tiny-math", "tiny-bf16-train"])
def test_compiled_adamw_equals_torch_optim_adamw_with_clipping(artifacts, fixtures, artifact):
    """On fp32 tensors for both: a bf16 artifact's update runs on its fp32 masters."""
    model = fixtures.tiny_model("math")
    cfg = fixtures.OPTIMIZER
    package = torch._inductor.aoti_load_package(str(artifacts / artifact / "cpu" / "adamw.pt2"))
    names = training.param_names(model)
    ref = {n: p.detach().clone().requires_grad_(True) for n, p in EntryModule(model).named_parameters()}
    groups = [
        {"params": [ref[n] for n in names if ref[n].dim() >= 2], "weight_decay": cfg.weight_decay},
        {"params": [ref[n] for n in names if ref[n].dim() < 2], "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=1.0, betas=(cfg.beta1, cfg.beta2), eps=cfg.eps)
    params = [ref[n].detach().clone() for n in names]
    exp_avg = [torch.zeros_like(p) for p in params]
    exp_avg_sq = [torch.zeros_like(p) for p in params]
    gen = torch.Generator().manual_seed(0)
    for step, lr in enumerate([3e-3, 1e-2, 5e-3, 1e-3, 2e-2], start=1):
        scale = 5.0 if step % 2 else 1e-3  # alternately clipped and not
        grads = [torch.randn(p.shape, generator=gen) * scale for p in params]
        for n, g in zip(names, grads, strict=True):
            ref[n].grad = g.clone()
        expected_norm = torch.nn.utils.clip_grad_norm_([ref[n] for n in names], cfg.grad_clip)
        for group in opt.param_groups:
            group["lr"] = lr
        opt.step()
        norm = package.loader.run(params + grads + exp_avg + exp_avg_sq + [torch.tensor(lr), torch.tensor(float(step))])
        torch.testing.assert_close(norm[0], expected_norm)
        for n, p in zip(names, params, strict=True):
            torch.testing.assert_close(p, ref[n].detach(), atol=1e-6, rtol=1e-5, msg=f"step {step}: {n}")
        for n, m in zip(names, exp_avg, strict=True):
            torch.testing.assert_close(m, opt.state[ref[n]]["exp_avg"], atol=1e-7, rtol=1e-5)


def test_cpu_flash_trains_with_its_own_forward_and_backward_kernels(flash_train_dir):
    """torch.export's stock joint export decomposes this forward into math yet keeps the kernel's
    backward, handing it the attention matrix as its logsumexp; ours keeps the forward whole."""
    t = json.loads((flash_train_dir / "training.json").read_text())
    assert t["attention"] == "flash" and t["rejected"] == {}
    assert t["verified"] and t["max_grad_error"] < 1e-4
    with zipfile.ZipFile(flash_train_dir / "train_step.pt2") as z:
        code = "".join(z.read(n).decode() for n in z.namelist() if n.endswith("wrapper.cpp"))
    assert "_scaled_dot_product_flash_attention_for_cpu(" in code
    assert "_scaled_dot_product_flash_attention_for_cpu_backward(" in code


def test_a_kernel_whose_compiled_gradients_disagree_falls_back_to_math(tmp_path, fixtures, monkeypatch):
    """The compile checks train_step against eager and trains with math instead, saying why."""
    measured = training.train_step_error
    monkeypatch.setattr(
        training,
        "train_step_error",
        lambda graph, gpt, x, y: 1.0 if gpt.attention == "flash" else measured(graph, gpt, x, y),
    )
    # train_step alone (eval_loss and adamw follow the kernel kept: tiny-math's manifest test): flash, rejected,
    # then math.
    model = fixtures.tiny_model("flash")
    t = pipeline.compile_checked_train_step(model, CPU, tmp_path, "flash", 4, pipeline.Progress(True))
    assert model.attention == "flash"  # inference keeps its pick
    assert t["verified"] and t["max_grad_error"] < 1e-4
    assert t["attention"] == "math" and "differ from eager by 1" in t["rejected"]["flash"]
    assert [p.name for p in tmp_path.glob("*.pt2")] == ["train_step.pt2"]
    assert "_scaled_dot_product_flash_attention_for_cpu" not in packages.wrapper_source(tmp_path / "train_step.pt2")


def test_dropout_is_active_in_train_step_and_follows_the_seed(artifacts, fixtures):
    """Masks come from the default generator, which the runtime seeds (tiny-bpe's train_step: dropout 0.1)."""
    from gpt_aot.importers.weights import load_model

    directory = artifacts / "tiny-bpe" / "cpu"
    assert json.loads((directory / "manifest.json").read_text())["model"]["dropout"] == fixtures.DROPOUT > 0
    model = load_model(artifacts / "hf-gpt2" / "model.safetensors", {"n_head": 2}, seed=0, attention="math")
    package = load(directory, "train_step", model)
    x = torch.randint(0, fixtures.BPE_TOKENS, (2, 16))
    torch.manual_seed(0)
    first = package.loader.run([x, x])[0]
    second = package.loader.run([x, x])[0]
    torch.manual_seed(0)
    again = package.loader.run([x, x])[0]
    assert not torch.equal(first, second)
    assert torch.equal(first, again)


def test_runtime_checkpoint_exports_to_nanogpt_layout(artifacts, tmp_path, fixtures):
    from safetensors.torch import load_file

    from gpt_aot.importers.checkpoint import export_weights
    from gpt_aot.importers.weights import load_model

    out = tmp_path / "model.safetensors"
    export_weights(artifacts / "imported_ckpt.safetensors", out, fixtures.CONFIG.vocab_size)
    weights = load_file(str(out))
    assert weights["transformer.wte.weight"].shape[0] == fixtures.CONFIG.vocab_size
    # the file records the shape its tensors cannot show: compiled again without being told n_head
    model = load_model(out, {}, seed=0, attention="math")
    assert model.config.n_head == fixtures.CONFIG.n_head and model.config.n_layer == fixtures.CONFIG.n_layer
    imported = load_file(str(artifacts / "imported_ckpt.safetensors"))
    torch.testing.assert_close(
        model.transformer.h[0].attn.c_attn.weight, imported["param.transformer.h.0.attn.c_attn.weight"]
    )


def test_training_attention_is_measured_by_forward_and_backward_against_math(fixtures):
    from gpt_aot.compiler import attention_pick
    from gpt_aot.model.attention import ATTENTION_KINDS

    model = fixtures.tiny_model("flash").train()
    candidates = attention_pick.measure_training(model)
    assert set(candidates) == set(ATTENTION_KINDS)
    assert candidates["math"]["max_abs_err"] == 0.0
    for kind in ("naive", "math", "flash"):  # every kind with a CPU kernel
        assert candidates[kind]["runs"] and candidates[kind]["ms"] > 0
        assert candidates[kind]["max_abs_err"] < 1e-4, kind
    assert not candidates["cudnn"]["runs"]
    assert model.attention == "flash" and model.training  # the model is left as it came
    assert all(p.grad is None for p in model.parameters())
    assert attention_pick.pick(candidates, torch.float32) in ("math", "flash")


def test_auto_measures_the_training_kernel_and_a_pinned_kernel_trains_with_itself(fixtures):
    from gpt_aot.compiler import attention_pick
    from gpt_aot.compiler.target import resolve

    target = resolve("cpu", "auto", "fp32")
    auto = attention_pick.choose_attention(fixtures.tiny_model("math"), target, "auto", attention_pick.measure_training)
    assert auto["selected_by"] == "measurement" and auto["candidates"]["math"]["runs"]
    assert "max_abs_err" in auto["candidates"]["flash"]  # gradients, not the prefill's logits, were compared
    assert auto["backend"] in ("math", "flash")  # naive is a reference, picked only when nothing else runs
    pinned = attention_pick.choose_attention(
        fixtures.tiny_model("naive"), target, "naive", attention_pick.measure_training
    )
    assert pinned == {"backend": "naive", "selected_by": "user"}


def test_a_training_artifact_whose_decode_runs_the_chunked_kernel_compiles(tmp_path, fixtures):
    """The inference graphs leave the model on decode's attention; the loss graph needs a causal one (the
    README demo failed so on a host whose decode pick was chunked: "chunked attention runs decode's call only")."""
    from gpt_aot.compiler.pipeline import compile_artifact
    from gpt_aot.compiler.target import resolve

    manifest = compile_artifact(
        fixtures.tiny_model("math"), resolve("cpu", "auto", "fp32"), tmp_path / "cpu", "t", fixtures.tokenizer(),
        attention="math", decode_attention="chunked", decode_linear="mm", batched_linear="mm", quiet=True,
        train=fixtures.OPTIMIZER,
    )  # fmt: skip
    assert manifest["attention"]["decode"]["backend"] == "chunked"
    assert manifest["training"]["attention"] == "math" and manifest["training"]["verified"]
    assert (tmp_path / "cpu" / "eval_loss.pt2").is_file()


def test_fp16_training_is_refused_before_any_compile(tmp_path, fixtures):
    from gpt_aot.compiler.pipeline import compile_artifact
    from gpt_aot.compiler.target import resolve

    target = resolve("cpu", "auto", "fp16")
    with pytest.raises(ValueError, match="fp16 gradients underflow"):
        compile_artifact(
            fixtures.tiny_model("math"), target, tmp_path / "cpu", "t", fixtures.tokenizer(), train=fixtures.OPTIMIZER
        )
    assert not (tmp_path / "cpu").exists()


def test_importing_a_checkpoint_of_another_shape_is_refused(artifacts, tmp_path):
    from gpt_aot.importers.checkpoint import import_nanogpt

    ckpt = torch.load(artifacts / "nanogpt_ckpt.pt", map_location="cpu", weights_only=True)
    artifact = artifacts / "tiny-math" / "cpu"
    assert import_nanogpt(artifacts / "nanogpt_ckpt.pt", artifact, tmp_path / "ok.safetensors") == ckpt["iter_num"]
    heads = ckpt["model_args"]["n_head"]
    ckpt["model_args"]["n_head"] = heads * 2  # same tensors, another model
    torch.save(ckpt, tmp_path / "other.pt")
    with pytest.raises(ValueError, match=f"has n_head={heads * 2}"):
        import_nanogpt(tmp_path / "other.pt", artifact, tmp_path / "other.safetensors")
    assert not (tmp_path / "other.safetensors").exists()


def test_importing_into_a_bf16_artifact_keeps_nanogpts_fp32_weights_and_moments(artifacts, tmp_path):
    """nanoGPT under bf16 autocast saves fp32 weights and AdamW state: they become the runtime's fp32 masters."""
    from safetensors import safe_open

    from gpt_aot.importers.checkpoint import import_nanogpt

    out = tmp_path / "bf16.safetensors"
    import_nanogpt(artifacts / "nanogpt_ckpt.pt", artifacts / "tiny-bf16-train" / "cpu", out)
    ckpt = torch.load(artifacts / "nanogpt_ckpt.pt", map_location="cpu", weights_only=True)
    with safe_open(str(out), "pt") as f:
        assert f.metadata()["format_version"] == "2" and f.metadata()["model.dtype"] == "bfloat16"
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    assert {t.dtype for k, t in tensors.items() if not k.startswith("rng.")} == {torch.float32}
    name = "transformer.h.0.attn.c_attn.weight"
    assert torch.equal(tensors[f"param.{name}"], ckpt["model"][f"_orig_mod.{name}"])
