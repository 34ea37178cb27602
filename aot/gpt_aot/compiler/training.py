"""Training graphs: the loss and every gradient in one joint graph, and AdamW
as a graph that updates parameters and optimizer state in place.

train_step(x[B,T], y[B,T]) -> (loss, grad_0, ..., grad_{n-1})
    forward + cross-entropy (ignore_index -1) + backward, traced by
    torch.export's joint forward-backward export (attention kernels kept whole); parameters are the graph's
    constants (the runtime binds the same tensors as for inference), gradients
    come back in `param_names` order.
adamw(params..., grads..., exp_avgs..., exp_avg_sqs..., lr[], step[]) -> grad_norm
    torch.optim.AdamW's update (decoupled weight decay on >= 2-D tensors only,
    as nanoGPT configures it) after global-norm gradient clipping; lr and step
    are inputs so the schedule lives in the runtime. Every tensor of it is in
    MASTER_DTYPE (fp32), whatever the model's dtype: a bf16 model trains as
    nanoGPT's bf16 autocast does, bf16 forward and backward over fp32 master
    weights, fp32 gradients and fp32 moments. In bf16 itself an update below half
    a weight's spacing (2^-9 to 2^-8 of its size) is lost, and Adam moves a weight
    by about lr per step: a LayerNorm gain near 1 never moves under lr ~2e-3, a
    weight of 0.02 under lr ~5e-5, and weight decay (1 - lr * wd) is lost. The
    runtime keeps the masters and copies them into the model's weights after each
    step (runtime/train/trainer.cpp); for an fp32 model the weights are the masters.
"""

from dataclasses import asdict, dataclass

import torch
import torch.export.experimental as export_experimental
import torch.nn as nn
from torch._decomp import core_aten_decompositions
from torch.export import Dim, ExportedProgram
from torch.export.exported_program import _decompose_exported_program

from gpt_aot.compiler.graphs import EntryModule
from gpt_aot.model.gpt import GPT

# The dtype of the optimizer's state: master weights, gradients as the update reads them, moments.
MASTER_DTYPE = torch.float32


@dataclass(frozen=True)
class OptimizerConfig:
    """nanoGPT's train.py defaults."""

    weight_decay: float = 1e-1
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    grad_clip: float = 1.0  # 0 disables clipping

    def to_dict(self) -> dict:
        return asdict(self)


def param_names(gpt: GPT) -> list[str]:
    """Trainable tensors in graph order: each tied tensor once, under its lm_head name."""
    return [n for n, _ in EntryModule(gpt).named_parameters()]


class TrainStepGraph(EntryModule):
    def forward(self, x, y):
        _, loss = self._gpt[0](x, y)
        return (loss,)


class EvalLossGraph(EntryModule):
    def forward(self, x, y):
        _, loss = self._gpt[0](x, y)
        return loss


class AdamWGraph(nn.Module):
    def __init__(self, decay: list[bool], cfg: OptimizerConfig):
        super().__init__()
        self.decay = decay
        self.cfg = cfg

    def forward(self, params, grads, exp_avgs, exp_avg_sqs, lr, step):
        cfg = self.cfg
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
        scale = torch.clamp(cfg.grad_clip / (norm + 1e-6), max=1.0) if cfg.grad_clip > 0 else torch.ones_like(norm)
        bias1 = 1 - cfg.beta1**step
        bias2_sqrt = torch.sqrt(1 - cfg.beta2**step)
        for p, g, m, v, decay in zip(params, grads, exp_avgs, exp_avg_sqs, self.decay, strict=True):
            g = g * scale
            if decay:
                p.mul_(1 - lr * cfg.weight_decay)
            m.lerp_(g, 1 - cfg.beta1)
            v.mul_(cfg.beta2).addcmul_(g, g, value=1 - cfg.beta2)
            denom = v.sqrt() / bias2_sqrt + cfg.eps
            p.sub_(lr / bias1 * m / denom)
        return (norm,)


def _example_batch(gpt: GPT, max_batch: int):
    c = gpt.config
    dims = {0: Dim("batch", min=1, max=max_batch), 1: Dim("seq", min=2, max=c.block_size)}
    x = torch.zeros(2, min(4, c.block_size), dtype=torch.int64, device=gpt.lm_head.weight.device)
    return (x, x.clone()), (dims, dims)


def _joint_forward_backward(program: ExportedProgram) -> ExportedProgram:
    """torch.export's joint forward+backward export (export.experimental._export_forward_backward),
    keeping CPU flash attention's forward kernel.

    The stock version decomposes `_scaled_dot_product_flash_attention_for_cpu` into math, whose
    second output is the attention matrix, yet keeps the kernel's backward, which reads that
    output as the logsumexp: every gradient below attention comes out wrong. Undecomposed, the
    forward kernel hands its backward the logsumexp it expects (and never builds a T x T matrix).
    """
    table = core_aten_decompositions()
    table.pop(torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default)
    joint = _decompose_exported_program(
        program,
        cia_to_decomp={},
        python_decomp_table=table,
        joint_loss_index=0,
        decompose_custom_triton_ops=False,
    )
    graph, signature = export_experimental._copy_graph_module_and_signature(joint)
    export_experimental._remove_detach_pass(graph, signature)
    return joint._update(graph, signature)


def export_train_step(gpt: GPT, max_batch: int) -> ExportedProgram:
    """Joint forward+backward export of the loss (dropout active). Call under the attention backend's context."""
    args, dynamic = _example_batch(gpt, max_batch)
    gpt.train()
    try:
        program = torch.export.export(TrainStepGraph(gpt), args, dynamic_shapes=dynamic)
        joint = _joint_forward_backward(program)
    finally:
        gpt.eval()
    grads = [s.target for s in joint.graph_signature.output_specs if s.kind.name == "GRADIENT_TO_PARAMETER"]
    if grads != param_names(gpt):
        raise RuntimeError(f"train_step gradients come out as {grads}, expected {param_names(gpt)}")
    return joint


def export_eval_loss(gpt: GPT, max_batch: int) -> ExportedProgram:
    """Loss without backward or dropout, for validation."""
    args, dynamic = _example_batch(gpt, max_batch)
    with torch.no_grad():
        return torch.export.export(EvalLossGraph(gpt), args, dynamic_shapes=dynamic)


def train_step_error(package_graph, gpt: GPT, x, y) -> float:
    """Largest |gradient or loss difference| between a compiled train_step and eager autograd."""
    params = dict(EntryModule(gpt).named_parameters())
    names = param_names(gpt)
    package_graph.load_constants(
        {n: params[n].detach() for n in package_graph.get_constant_fqns()}, check_full_update=True, user_managed=True
    )
    compiled = package_graph.loader.run([x, y])
    gpt.zero_grad(set_to_none=True)
    _, loss = gpt(x, y)
    loss.backward()
    errors = [(compiled[0] - loss.detach()).abs().max()]
    errors += [(g - params[n].grad).abs().max() for n, g in zip(names, compiled[1:], strict=True)]
    gpt.zero_grad(set_to_none=True)
    return max(e.item() for e in errors)


def export_adamw(gpt: GPT, cfg: OptimizerConfig) -> ExportedProgram:
    """The update over fp32 masters, gradients and moments (MASTER_DTYPE), whatever the model's dtype."""
    params = [p.detach().to(MASTER_DTYPE, copy=True) for p in EntryModule(gpt).parameters()]
    decay = [p.dim() >= 2 for p in params]
    zeros = [torch.zeros_like(p) for p in params]
    scalar = torch.tensor(1.0, dtype=torch.float32, device=params[0].device)
    args = (params, [z.clone() for z in zeros], [z.clone() for z in zeros], zeros, scalar, scalar.clone())
    with torch.no_grad():
        return torch.export.export(AdamWGraph(decay, cfg), args)


def train_specs(gpt: GPT, cfg: OptimizerConfig) -> dict:
    names = param_names(gpt)
    params = dict(EntryModule(gpt).named_parameters())
    dt = str(gpt.dtype).removeprefix("torch.")
    master = str(MASTER_DTYPE).removeprefix("torch.")
    return {
        "param_names": names,
        # adamw's tensors (masters, gradients, moments) and checkpoints' optimizer state; the model's
        # weights are the masters rounded to `dtype` (the masters themselves when equal)
        "master_dtype": master,
        "weight_decay_params": [n for n in names if params[n].dim() >= 2],
        "optimizer": {"kind": "adamw", **cfg.to_dict()},
        "train_step": {
            "inputs": [
                {"name": "x", "dtype": "int64", "shape": ["batch", "seq"]},
                {"name": "y", "dtype": "int64", "shape": ["batch", "seq"]},
            ],
            "outputs": [{"name": "loss", "dtype": dt, "shape": []}]
            + [{"name": f"grad:{n}", "dtype": dt, "shape": list(params[n].shape)} for n in names],
        },
        "eval_loss": {
            "inputs": [
                {"name": "x", "dtype": "int64", "shape": ["batch", "seq"]},
                {"name": "y", "dtype": "int64", "shape": ["batch", "seq"]},
            ],
            "outputs": [{"name": "loss", "dtype": dt, "shape": []}],
        },
        "adamw": {
            "inputs": [f"{group}:{n}" for group in ("param", "grad", "exp_avg", "exp_avg_sq") for n in names]
            + ["lr", "step"],
            "outputs": [{"name": "grad_norm", "dtype": master, "shape": []}],
            "mutates": ["param", "exp_avg", "exp_avg_sq"],
        },
    }
