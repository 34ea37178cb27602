"""The offline step: model → exported graphs → AOTInductor → artifact directory.

The artifact is assembled in a temporary sibling directory and renamed into
place, so a failed or interrupted compile never leaves a partial artifact.
"""

import json
import shutil
import tempfile
import time
import zipfile
from contextlib import contextmanager
from pathlib import Path

import torch
from safetensors.torch import save_file

from . import attention_pick, training
from .attention import attention_context, attention_runs_on
from .graphs import MAX_BATCH, export_graphs, graph_specs
from .manifest import write_manifest
from .model import GPT, linear_form_runs_on, linear_weight_names
from .target import Target

# One copy of the weights for all graphs: nothing is baked into the .so, every
# parameter stays a named constant bound by the runtime, and nothing is folded
# into derived copies that would go stale when weights change.
INDUCTOR_CONFIGS = {
    "aot_inductor.package_constants_in_so": False,
    "always_keep_tensor_constants": True,
    "aot_inductor.use_runtime_constant_folding": False,
    "freezing": False,
}

# The kernel call each backend leaves in AOTInductor's generated wrapper.
KERNEL_SYMBOLS = {
    ("cpu", "flash"): "_scaled_dot_product_flash_attention_for_cpu",
    ("cuda", "flash"): "_scaled_dot_product_flash_attention",
    ("cuda", "efficient"): "_scaled_dot_product_efficient_attention",
    ("cuda", "cudnn"): "_scaled_dot_product_cudnn_attention",
}
GOLDEN_PROMPT_LEN = 8
GOLDEN_TOLERANCE = {torch.float32: (1e-4, 1e-4), torch.bfloat16: (5e-2, 5e-2), torch.float16: (1e-2, 1e-2)}


class Progress:
    """One line per stage with the time it took."""

    def __init__(self, quiet: bool = False):
        self.step, self.quiet = 0, quiet

    @contextmanager
    def stage(self, label: str):
        self.step += 1
        start = time.perf_counter()
        if not self.quiet:
            print(f"[{self.step}] {label} ...", end="", flush=True)
        yield
        if not self.quiet:
            print(f" {time.perf_counter() - start:.1f}s", flush=True)


def choose_attention(model: GPT, target: Target, requested: str, measure=attention_pick.measure) -> dict:
    """The pinned kernel, or the fastest correct one by `measure` (attention_pick's
    measure for the prefill, measure_decode, measure_training)."""
    if requested != "auto":
        if not attention_runs_on(requested, target.torch_device, target.dtype):
            raise ValueError(f"attention {requested!r} has no kernel for {target.device}/{target.dtype}")
        return {"backend": requested, "selected_by": "user"}
    candidates = measure(model)
    return {
        "backend": attention_pick.pick(candidates, target.dtype),
        "selected_by": "measurement",
        "candidates": candidates,
    }


# decode_one's linear forms. oneDNN's is left out: it is measured only eagerly
# (attention_pick.measure_decode_linear), the reduction only compiled.
DECODE_ONE_LINEAR_FORMS = ("mm", "reduction")
# Linear forms of the graphs that step many rows (prefill, decode): matrix
# products only, the reduction reads the weight once per row. Measured on a
# decode step of BATCHED_ROWS sequences, the pick serves both graphs.
BATCHED_LINEAR_FORMS = ("mm", "onednn")
BATCHED_ROWS = 8


def choose_linear(
    model: GPT, target: Target, requested: str, attention: str, forms: tuple = DECODE_ONE_LINEAR_FORMS, rows: int = 1
) -> dict:
    """A linear form out of `forms`: the pinned one, or the fastest correct one
    on decode steps of `rows` sequences with decode's `attention`
    (attention_pick.measure_decode_linear). Where mm is the only one of `forms`
    with a kernel (oneDNN's on a GPU), nothing is measured."""
    if requested != "auto":
        if requested not in forms:
            raise ValueError(f"linear form {requested!r} is not one of auto, {', '.join(forms)}")
        if not linear_form_runs_on(requested, target.torch_device):
            raise ValueError(f"linear form {requested!r} has no kernel on {target.torch_device.type}")
        return {"form": requested, "selected_by": "user"}
    if [f for f in forms if f != "mm" and linear_form_runs_on(f, target.torch_device)] == []:
        return {"form": "mm", "selected_by": "only form with a kernel"}
    saved = model.attention
    model.set_attention(attention)
    try:
        candidates = attention_pick.measure_decode_linear(model, forms, rows)
    finally:
        model.set_attention(saved)
    return {
        "form": attention_pick.pick(candidates, target.dtype),
        "selected_by": "measurement",
        "rows": rows,
        "candidates": candidates,
    }


def _with_packed_weights(pick: dict, model: GPT) -> dict:
    """The onednn form's record names the weights the runtime binds packed."""
    return {**pick, "packed": linear_weight_names(model)} if pick["form"] == "onednn" else pick


def _wrapper_source(package: Path) -> str:
    with zipfile.ZipFile(package) as z:
        return "".join(z.read(n).decode() for n in z.namelist() if n.endswith("wrapper.cpp"))


def check_kernel(package: Path, device: str, kind: str) -> None:
    """Prove the compiled graph calls the chosen attention kernel, not a fallback."""
    code = _wrapper_source(package)
    expected = KERNEL_SYMBOLS.get((device, kind))
    called = {s for s in KERNEL_SYMBOLS.values() if s + "(" in code or s + "_" in code}
    ok = (expected in called) if expected else not called
    if not ok:
        raise RuntimeError(
            f"{package.name}: expected attention {kind} ({expected or 'no SDPA kernel'}), found {called}"
        )


def compile_package(program, package: Path, target: Target, attention: str) -> None:
    """AOTInductor-compile one exported program with the attention backend pinned."""
    with attention_context(attention):
        torch._inductor.aoti_compile_and_package(program, package_path=str(package), inductor_configs=INDUCTOR_CONFIGS)
    check_kernel(package, target.device, attention)


def compile_training(model: GPT, target: Target, work: Path, choice: dict, max_batch: int, cfg, progress) -> dict:
    """train_step, eval_loss and adamw graphs, and the manifest's "training" section.

    Each compiled train_step is checked against eager autograd; a kernel whose
    compiled gradients disagree is replaced by math, and the manifest says so.
    """
    attention, inference_attention = choice["backend"], model.attention
    section = {"attention": attention, "rejected": {}, "attention_choice": choice}
    gen = torch.Generator().manual_seed(0)
    c = model.config
    probe = [torch.randint(0, c.vocab_size, (2, c.block_size), generator=gen).to(target.torch_device) for _ in "xy"]
    for kind in dict.fromkeys([attention, "math"]):
        model.set_attention(kind)
        with progress.stage(f"export + compile train_step (attention={kind})"):
            with attention_context(kind):
                program = training.export_train_step(model, max_batch)
            compile_package(program, work / "train_step.pt2", target, kind)
        if c.dropout > 0:  # random masks: nothing to compare with eager
            section["attention"], section["verified"] = kind, False
            break
        err = training.train_step_error(torch._inductor.aoti_load_package(str(work / "train_step.pt2")), model, *probe)
        tol = GOLDEN_TOLERANCE[target.dtype][0] * 10
        if err <= tol:
            section["attention"], section["verified"], section["max_grad_error"] = kind, True, err
            break
        section["rejected"][kind] = f"compiled gradients differ from eager by {err:.3g} (tolerance {tol:.3g})"
    else:
        raise RuntimeError(f"no attention kernel gives correct compiled gradients: {section['rejected']}")
    model.set_attention(inference_attention)
    with progress.stage("export + compile eval_loss"):
        with attention_context(section["attention"]):
            compile_package(
                training.export_eval_loss(model, max_batch), work / "eval_loss.pt2", target, section["attention"]
            )
    with progress.stage("export + compile adamw"):
        compile_package(training.export_adamw(model, cfg), work / "adamw.pt2", target, "math")
    specs = training.train_specs(model, cfg)
    for graph in ("train_step", "eval_loss", "adamw"):
        specs[graph].update(file=f"{graph}.pt2", max_batch=max_batch)
    return {**section, **specs}


def golden_vector(model: GPT) -> dict:
    """Eager reference outputs the runtime's verify reproduces: a prefill and one decode step."""
    c = model.config
    device = model.lm_head.weight.device
    n = min(GOLDEN_PROMPT_LEN, c.block_size - 1)
    gen = torch.Generator().manual_seed(1234)
    tokens = torch.randint(0, c.vocab_size, (1, n), generator=gen).to(device)
    kv = model.new_kv_cache(1)
    with torch.no_grad():
        prefill_logits = model.prefill(tokens, kv)
        next_token = prefill_logits[:, : c.vocab_size].argmax(-1, keepdim=True)
        decode_logits = model.decode(next_token, torch.tensor([n], device=device), kv)
    return {
        "tokens": tokens.cpu(),
        "prefill_logits": prefill_logits.float().cpu(),
        "decode_token": next_token.cpu(),
        "decode_logits": decode_logits.float().cpu(),
    }


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


def compile_artifact(
    model: GPT,
    target: Target,
    out_dir: Path,
    name: str,
    tokenizer: dict,
    attention: str = "auto",
    decode_linear: str = "auto",
    batched_linear: str = "auto",
    max_batch: int = MAX_BATCH,
    quiet: bool = False,
    train: training.OptimizerConfig | None = None,
) -> dict:
    """Build `out_dir` (e.g. model_artifacts/<name>/cpu) and return its manifest.
    `attention`, `decode_linear` (decode_one's linears) and `batched_linear`
    (prefill's and decode's) are pinned or "auto" (measured here).
    With `train`, the artifact also holds the training graphs."""
    if train is not None and target.dtype == torch.float16:
        # Weights and Adam's moments live in the artifact's dtype: in fp16, (1 - beta2) * g^2 underflows to 0 for
        # gradients below ~1e-3, the update becomes lr * m / eps, and the weights blow up.
        raise ValueError("training needs fp32 or bf16 weights: fp16 underflows Adam's second moment")
    progress = Progress(quiet=quiet)
    model = model.to(device=target.torch_device, dtype=target.dtype).eval()
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        with progress.stage("choose attention"):
            choice = choose_attention(model, target, attention)
            choice["decode"] = choose_attention(model, target, attention, attention_pick.measure_decode)
            kinds = {"prefill": choice["backend"], "decode": choice["decode"]["backend"]}
        with progress.stage("choose linear forms"):
            one = choose_linear(model, target, decode_linear, kinds["decode"])
            rows = min(BATCHED_ROWS, max_batch)
            batched = choose_linear(model, target, batched_linear, kinds["decode"], BATCHED_LINEAR_FORMS, rows)
            linears = {"prefill": batched, "decode": batched, "decode_one": one}
        with progress.stage(
            f"export graphs (attention: prefill {kinds['prefill']}, decode {kinds['decode']}; "
            f"linears: prefill and decode {batched['form']}, decode_one {one['form']})"
        ):
            programs = export_graphs(model, kinds, max_batch, {g: pick["form"] for g, pick in linears.items()})
            kinds["decode_one"] = kinds["decode"]
        specs = graph_specs(model)
        for graph, program in programs.items():
            with progress.stage(f"AOTInductor compile {graph}"):
                compile_package(program, work / f"{graph}.pt2", target, kinds[graph])
                specs[graph].update(
                    file=f"{graph}.pt2",
                    max_batch=1 if graph == "decode_one" else max_batch,
                    linear=_with_packed_weights(linears[graph], model),
                )
        training_section = None
        if train:
            with progress.stage("choose training attention"):
                train_choice = choose_attention(model, target, attention, attention_pick.measure_training)
            training_section = compile_training(model, target, work, train_choice, max_batch, train, progress)
        with progress.stage("write weights, golden vector, manifest"):
            tensors, tied = weights_for_runtime(model)
            save_file(tensors, str(work / "weights.safetensors"))
            save_file(golden_vector(model), str(work / "golden.safetensors"))
            (work / "tokenizer.json").write_text(json.dumps(tokenizer, ensure_ascii=False))
            atol, rtol = GOLDEN_TOLERANCE[target.dtype]
            c = model.config
            manifest = write_manifest(
                work,
                {
                    "name": name,
                    "torch_version": torch.__version__,
                    "target": target.to_manifest(),
                    "dtype": str(target.dtype).removeprefix("torch."),
                    "attention": choice,
                    "model": {**c.to_dict(), "padded_vocab_size": c.padded_vocab_size},
                    "weights": {"file": "weights.safetensors", "tied": tied},
                    "graphs": specs,
                    "tokenizer": {"file": "tokenizer.json", "kind": tokenizer["kind"]},
                    "golden": {"file": "golden.safetensors", "atol": atol, "rtol": rtol},
                    **({"training": training_section} if training_section else {}),
                },
            )
        _replace_dir(work, out_dir)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return manifest


def _replace_dir(src: Path, dst: Path) -> None:
    """Swap a finished artifact into place; the old one is removed only after, and put back if the swap fails."""
    old = None
    if dst.exists():
        old = dst.with_name(f".{dst.name}.old")
        shutil.rmtree(old, ignore_errors=True)
        dst.rename(old)
    try:
        src.rename(dst)
    except BaseException:
        if old is not None:
            old.rename(dst)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
