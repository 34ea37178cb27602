"""The compile target: device, arch/ISA and dtype, as the manifest records them.

AOTInductor compiles for the machine it runs on, so a target is resolved
against the hardware present and refused when it cannot be built here.
"""

import platform
from dataclasses import dataclass

import torch

from gpt_aot.compiler import isa as isa_mod
from gpt_aot.compiler import torch_patches

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
DTYPES.update({str(d).removeprefix("torch."): d for d in list(DTYPES.values())})


@dataclass(frozen=True)
class Target:
    device: str  # "cpu" or "cuda"
    arch: str  # "x86_64", "aarch64", "sm_90", ...
    dtype: torch.dtype
    details: dict

    @property
    def torch_device(self) -> torch.device:
        return torch.device(self.device)

    @property
    def dir_name(self) -> str:
        return "cpu" if self.device == "cpu" else self.arch

    def to_manifest(self) -> dict:
        return {"device": self.device, "arch": self.arch, **self.details}

    @property
    def isa_level(self) -> str:
        return self.details.get("isa_level", isa_mod.NATIVE)


def resolve(device: str, arch: str, dtype: str, isa: str = isa_mod.NATIVE) -> Target:
    """`isa` is a CPU target's instruction-set level: native (the build host's) or an x86-64 psABI level."""
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}: choose from {sorted(DTYPES)}")
    if device != "cpu" and isa != isa_mod.NATIVE:
        raise ValueError(f"--isa {isa} is for CPU targets; a {device} artifact is compiled for its GPU arch")
    if device == "cpu":
        machine = platform.machine()
        if arch not in ("auto", machine):
            raise ValueError(f"cannot compile for CPU arch {arch} on a {machine} machine")
        if isa != isa_mod.NATIVE and machine != "x86_64":
            raise ValueError(f"--isa {isa} is an x86-64 level; this machine is {machine}")
        isa_mod.check_level(isa)
        return Target("cpu", machine, DTYPES[dtype], {"isa": torch_patches.vec_isa_name(isa), "isa_level": isa})
    if device == "cuda":
        if not torch.cuda.is_available():
            raise ValueError("--target cuda needs a GPU present: AOTInductor compiles for the GPU it runs on")
        major, minor = torch.cuda.get_device_capability()
        present = f"sm_{major}{minor}"
        if arch not in ("auto", present):
            raise ValueError(f"cannot compile for {arch} on this GPU ({present}, {torch.cuda.get_device_name()})")
        details = {
            "compute_capability": f"{major}.{minor}",
            "gpu_name": torch.cuda.get_device_name(),
            "cuda_version": torch.version.cuda,
            "cudnn_version": torch.backends.cudnn.version(),
        }
        return Target("cuda", present, DTYPES[dtype], details)
    raise ValueError(f"unknown target device {device!r}: choose cpu or cuda")
