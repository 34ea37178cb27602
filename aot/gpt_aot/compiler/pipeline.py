"""The offline pipeline, stage by stage: choose attention and linear forms →
export the graphs → AOTInductor-compile each → write weights, golden vector and
manifest, all into a temporary directory swapped into place at the end, so a
failed or interrupted compile never leaves a partial artifact.

Each stage's work lives in its own module of compiler/ (attention_pick,
linear_pick, graphs, training, inductor, artifact_files; base/files for the
swap); this one runs them in order.
"""

import dataclasses
import time
from contextlib import contextmanager
from pathlib import Path

import torch

from gpt_aot.artifact.golden import GOLDEN_TOLERANCE
from gpt_aot.base.files import replaced_directory
from gpt_aot.compiler import attention_pick, linear_pick, packages, torch_patches, training
from gpt_aot.compiler.artifact_files import write_artifact_files
from gpt_aot.compiler.graphs import MAX_BATCH, export_graphs, graph_specs
from gpt_aot.compiler.inductor import compile_package
from gpt_aot.compiler.target import Target
from gpt_aot.model import kernels
from gpt_aot.model.attention import ONE_QUERY_KINDS, attention_context, several_queries_kind
from gpt_aot.model.gpt import GPT, KV_DTYPES
from gpt_aot.model.quantize import QUANTIZATIONS, quantize_int4, quantize_int8, set_int8_layout, weight_bytes
from gpt_aot.text.tokenizer import check_fits


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


def compile_checked_train_step(
    model: GPT, target: Target, work: Path, attention: str, max_batch: int, progress
) -> dict:
    """work/train_step.pt2 with `attention`, checked against eager autograd; a kernel whose compiled
    gradients disagree is replaced by math. Returns what the manifest's "training" section says of it:
    the kernel kept, those rejected and why, and whether (and how closely) the gradients were checked.
    The model is left with the attention it came with."""
    section = {"attention": attention, "rejected": {}}
    inference_attention = model.attention
    gen = torch.Generator().manual_seed(0)
    c = model.config
    probe = [torch.randint(0, c.vocab_size, (2, c.block_size), generator=gen).to(target.torch_device) for _ in "xy"]
    try:
        for kind in dict.fromkeys([attention, "math"]):
            model.set_attention(kind)
            with progress.stage(f"export + compile train_step (attention={kind})"):
                with attention_context(kind):
                    program = training.export_train_step(model, max_batch)
                compile_package(program, work / "train_step.pt2", target, kind)
            if c.dropout > 0:  # random masks: nothing to compare with eager
                return {**section, "attention": kind, "verified": False}
            package = torch._inductor.aoti_load_package(str(work / "train_step.pt2"))
            err = training.train_step_error(package, model, *probe)
            tol = GOLDEN_TOLERANCE[target.dtype][0] * 10
            if err <= tol:
                return {**section, "attention": kind, "verified": True, "max_grad_error": err}
            section["rejected"][kind] = f"compiled gradients differ from eager by {err:.3g} (tolerance {tol:.3g})"
        raise RuntimeError(f"no attention kernel gives correct compiled gradients: {section['rejected']}")
    finally:
        model.set_attention(inference_attention)


def compile_training(model: GPT, target: Target, work: Path, choice: dict, max_batch: int, cfg, progress) -> dict:
    """train_step (compile_checked_train_step), eval_loss and adamw graphs, and the manifest's "training"
    section."""
    section = compile_checked_train_step(model, target, work, choice["backend"], max_batch, progress)
    section["attention_choice"] = choice
    # The model comes with the inference graphs' last attention, decode's: a one-query kernel (chunked) has no
    # causal call for the loss.
    inference_attention = model.attention
    model.set_attention(section["attention"])
    try:
        with progress.stage("export + compile eval_loss"), attention_context(section["attention"]):
            compile_package(
                training.export_eval_loss(model, max_batch), work / "eval_loss.pt2", target, section["attention"]
            )
    finally:
        model.set_attention(inference_attention)
    with progress.stage("export + compile adamw"):
        compile_package(training.export_adamw(model, cfg), work / "adamw.pt2", target, "math")
    specs = training.train_specs(model, cfg)
    for graph in ("train_step", "eval_loss", "adamw"):
        specs[graph].update(file=f"{graph}.pt2", max_batch=max_batch)
    return {**section, **specs}


# An int8 KV cache is read by the kernel library's attention alone (gpt.KV_DTYPES): decode's graphs call it, so
# decode's kind is pinned, not measured. A prompt's tokens attend to the cache's values with prefill's SDPA kernel.
KV_DTYPE_ATTENTION = {"backend": "chunked", "selected_by": "kv_dtype: only the chunked kernel reads an int8 cache"}


def check_kv_dtype(kv_dtype: str | None, target: Target, decode_attention: str | None):
    """Refuses a KV cache dtype that the target, or the decode attention asked for, cannot read, before anything is
    measured. `--attention` names prefill's and training's kernel, which never read it."""
    if kv_dtype is None:
        return
    if kv_dtype not in KV_DTYPES:
        raise ValueError(f"KV cache dtype {kv_dtype!r} is not one of {', '.join(KV_DTYPES)}")
    if target.device != "cpu":
        raise ValueError(
            f"an {kv_dtype} KV cache is read by the CPU kernel library's attention: not on {target.device}"
        )
    if decode_attention not in (None, "auto", "chunked"):
        raise ValueError(
            f"an {kv_dtype} KV cache is read by the chunked attention only: --decode-attention {decode_attention} "
            "cannot read it (leave it auto, or name chunked)"
        )
    if not kernels.available():
        raise ValueError(f"an {kv_dtype} KV cache needs the kernel library, which did not build here")


def compile_artifact(
    model: GPT,
    target: Target,
    out_dir: Path,
    name: str,
    tokenizer: dict,
    attention: str = "auto",
    decode_attention: str | None = None,
    decode_linear: str = "auto",
    batched_linear: str = "auto",
    max_batch: int = MAX_BATCH,
    quiet: bool = False,
    train: training.OptimizerConfig | None = None,
    quantize: str | None = None,
    group_size: int = 32,
    kv_dtype: str | None = None,
) -> dict:
    """Build `out_dir` (e.g. model_artifacts/<name>/cpu) and return its manifest.
    `attention` (prefill's and training's, and decode's unless `decode_attention`
    names its own), `decode_linear` (decode_one's linears) and `batched_linear`
    (prefill's and decode's) are pinned or "auto" (measured here).
    With `train`, the artifact also holds the training graphs; with
    quantize="int8" or "int4", its linears' weights are int8, or int4 in groups
    of `group_size` inputs (model/quantize.py; inference only). With kv_dtype="int8"
    the KV cache is int8 (gpt.KV_DTYPES), which decode's steps read with the kernel
    library's chunked attention; a prompt's tokens attend to its values with SDPA."""
    if quantize not in (None, *QUANTIZATIONS):
        raise ValueError(f"quantization {quantize!r} is not one of {', '.join(QUANTIZATIONS)}")
    if quantize and train is not None:
        raise ValueError(f"a quantized artifact is for inference only: {quantize} weights cannot be trained")
    if quantize == "int4" and target.device != "cpu":
        raise ValueError("int4 weights are packed for the CPU's int4 kernel: CUDA's reads another packing")
    if train is not None and target.dtype == torch.float16:
        # The optimizer's state is fp32 (training.MASTER_DTYPE), but fp16's backward itself loses small gradients
        # (below 2^-24) without loss scaling, which nanoGPT does with a GradScaler and the runtime does not.
        raise ValueError("training needs fp32 or bf16 weights: fp16 gradients underflow without loss scaling")
    check_kv_dtype(kv_dtype, target, decode_attention)
    check_fits(tokenizer, model.config.vocab_size)
    progress = Progress(quiet=quiet)
    unquantized_bytes = weight_bytes(model, target.dtype)
    if quantize:
        # From the weights as given (fp32 for a checkpoint trained in it), each scale rounded to the artifact's dtype.
        if quantize == "int8":
            quantize_int8(model, target.dtype)
        else:
            quantize_int4(model, target.dtype, group_size)
    model = model.to(device=target.torch_device, dtype=target.dtype).eval()
    # The measurements compile for the level too, and run the kernel library's path of the level, so the forms
    # chosen are the fastest of the code shipped, at the level's floor.
    with (
        replaced_directory(Path(out_dir)) as work,
        torch_patches.compiling_for(target.isa_level),
        kernels.running_for(target.isa_level),
    ):
        kernels_path = kernels.active_path() if target.device == "cpu" else None
        with progress.stage("choose attention"):
            choice = attention_pick.choose_attention(model, target, attention)
            if kv_dtype:
                model.set_kv_dtype(kv_dtype)
                choice["decode"] = KV_DTYPE_ATTENTION
            else:
                choice["decode"] = attention_pick.choose_attention(
                    model, target, decode_attention or attention, attention_pick.measure_decode
                )
            kinds = {"prefill": choice["backend"], "decode": choice["decode"]["backend"]}
        with progress.stage("choose linear forms"):
            rows = min(linear_pick.BATCHED_ROWS, max_batch)
            # decode_one's first: an int8 model's weights take the layout its form reads, which the others share.
            decode_one = linear_pick.choose_linear(model, target, decode_linear, kinds["decode"])
            if quantize == "int8":
                set_int8_layout(model, linear_pick.int8_layout_for(decode_one["form"]))
            linears = {
                "prefill": linear_pick.choose_linear(model, target, batched_linear, kinds["prefill"], "prefill"),
                "decode": linear_pick.choose_linear(model, target, batched_linear, kinds["decode"], "decode", rows),
                "decode_one": decode_one,
            }
            linears["extend"] = linears["prefill"]  # several tokens a row, as a prompt's
            if kinds["decode"] in ONE_QUERY_KINDS:  # its attention reads each token's own cache row in place
                linears["mixed"] = linears["decode"]  # a decode step's rows and a few prompt tokens
        forms = ", ".join(f"{graph} {pick['form']}" for graph, pick in linears.items())
        with progress.stage(
            f"export graphs (attention: prefill {kinds['prefill']}, decode {kinds['decode']}; linears: {forms})"
        ):
            programs = export_graphs(model, kinds, max_batch, {g: pick["form"] for g, pick in linears.items()})
            kinds["decode_one"] = kinds["decode"]
            kinds["extend"] = several_queries_kind(kinds["decode"])
            kinds["mixed"] = kinds["decode"]
        specs = {graph: spec for graph, spec in graph_specs(model).items() if graph in programs}
        for graph, program in programs.items():
            with progress.stage(f"AOTInductor compile {graph}"):
                compile_package(program, work / f"{graph}.pt2", target, kinds[graph])
                specs[graph].update(
                    file=f"{graph}.pt2",
                    max_batch=1 if graph == "decode_one" else max_batch,
                    linear=linear_pick.with_packed_weights(linears[graph], model),
                )
        training_section = None
        if train:
            with progress.stage("choose training attention"):
                train_choice = attention_pick.choose_attention(
                    model, target, attention, attention_pick.measure_training
                )
            training_section = compile_training(model, target, work, train_choice, max_batch, train, progress)
        own = sorted({op for p in work.glob("*.pt2") for op in packages.kernel_operators(p)})
        kernels_section = {"library": "gpt_kernels", "version": kernels.load(), "operators": own} if own else None
        if target.device == "cpu":
            # Every graph's recorded compile commands, training graphs' too, say what the code may execute.
            recorded = packages.package_isa(sorted(work.glob("*.pt2")))
            if kernels_path:  # the kernel library's path the forms were measured on (kernels.running_for)
                recorded["kernels_path"] = kernels_path
            target = dataclasses.replace(target, details={**target.details, **recorded})
        quantization = None
        if quantize:
            quantization = {
                "scheme": quantize,
                "granularity": (
                    "per output channel, symmetric"
                    if quantize == "int8"
                    else f"per output channel and group of {group_size} inputs, a scale and a zero"
                ),
                **({"group_size": group_size} if quantize == "int4" else {}),
                "quantized": (
                    f"every linear's weight, lm_head's included; the tied embedding gathers lm_head's {quantize} rows"
                ),
                "layout": model.weight_layout,
                "weight_bytes": weight_bytes(model, target.dtype),
                "unquantized_weight_bytes": unquantized_bytes,
            }
        with progress.stage("write weights, golden vector, manifest"):
            # The golden vector runs the model as export_graphs left it (decode's kind, mm linears), its prefill
            # with prefill's kind.
            manifest = write_artifact_files(
                work, model, target, name, tokenizer, choice, specs, training_section, quantization, kernels_section
            )
    return manifest
