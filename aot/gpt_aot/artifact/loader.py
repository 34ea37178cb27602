"""Load an artifact's compiled graphs from Python, bound to one weights map.

The C++ runtime is what ships; this loader exists for tests and benchmarks
that compare the compiled graphs with eager PyTorch in one process.
"""

from pathlib import Path

import torch
from safetensors.torch import load_file

from gpt_aot.artifact.manifest import read_manifest, sha256_file
from gpt_aot.model import kernels
from gpt_aot.model.gpt import layer_caches
from gpt_aot.model.linear import host_reads_int4_blocks64, pack_linear_weight


class ArtifactGraphs:
    def __init__(self, directory: Path):
        self.directory = directory = Path(directory)
        self.manifest = read_manifest(directory)
        self.device = torch.device("cuda" if self.manifest["target"]["device"] == "cuda" else "cpu")
        for name, entry in self.manifest["files"].items():
            if sha256_file(directory / name) != entry["sha256"]:
                raise ValueError(f"{directory / name}: sha256 mismatch")
        if "kernels" in self.manifest:  # its graphs call the kernel library's operators: registered first
            kernels.load()
        self.weights = load_file(str(directory / self.manifest["weights"]["file"]), device=str(self.device))
        for alias, stored in self.manifest["weights"]["tied"].items():
            self.weights[alias] = self.weights[stored]
        self.graphs = {}
        packed = {}  # as the runtime binds them: one packed copy, shared by the graphs that list it
        for name, spec in self.manifest["graphs"].items():
            linear = spec.get("linear", {})
            if linear.get("form") == "int4pack" and "packed" not in linear and not host_reads_int4_blocks64():
                raise ValueError(
                    f"{directory}: graph {name} reads its int4 weights as stored, which this host's int4 kernel "
                    f"(ATen CPU capability {torch.backends.cpu.get_cpu_capability()}) does not read: recompile it"
                )
            graph = torch._inductor.aoti_load_package(str(directory / spec["file"]))
            bound = dict(self.weights)
            for fqn in linear.get("packed", []):
                # The onednn form's oneDNN layout, the panels form's, or the int4pack form's packing of this host.
                key = (linear["form"], fqn)
                bound[fqn] = packed.setdefault(key, pack_linear_weight(self.weights[fqn], linear["form"]))
            graph.load_constants(
                {fqn: bound[fqn] for fqn in graph.get_constant_fqns()},
                check_full_update=True,
                user_managed=True,
            )
            self.graphs[name] = graph

    # The graphs' cache layout (gpt.GPT.new_kv_cache): one spare position.
    def new_kv_cache(self, batch: int) -> torch.Tensor:
        m = self.manifest["model"]
        position, dtype = m["n_embd"] // m["n_head"], getattr(torch, self.manifest["dtype"])
        if "kv_cache" in self.manifest:  # int8, each position's scale after its values
            position, dtype = self.manifest["kv_cache"]["position_bytes"], torch.int8
        shape = (m["n_layer"], 2, batch, m["n_head"], m["block_size"] + 1, position)
        return torch.zeros(shape, dtype=dtype, device=self.device)

    # Compiled graphs assume the contiguous strides they were traced with and do not
    # check them: a strided view (idx[:, :1]) would be misread, so inputs are made contiguous.
    def prefill(self, idx: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
        return self.graphs["prefill"](idx.contiguous(), layer_caches(kv, self.manifest["model"]["block_size"]))

    # One row runs decode_one, as the runtime does (runtime/exec/model.cpp); the cache
    # views span the positions up to the furthest row's, as the runtime's do.
    def decode(self, idx: torch.Tensor, pos: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
        graph = self.graphs["decode_one" if idx.shape[0] == 1 else "decode"]
        span = max(2, int(pos.max()) + 1)
        return graph(idx.contiguous(), pos.contiguous(), layer_caches(kv, span))

    # The views span the positions up to the furthest row's last new one, as the runtime's do.
    def extend(self, idx: torch.Tensor, start: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
        span = max(2, int(start.max()) + idx.shape[1])
        return self.graphs["extend"](idx.contiguous(), start.contiguous(), layer_caches(kv, span))

    # Every cache row the session has; the views span the positions up to the furthest token's.
    def mixed(
        self, idx: torch.Tensor, pos: torch.Tensor, seq: torch.Tensor, last: torch.Tensor, kv: torch.Tensor
    ) -> torch.Tensor:
        span = max(2, int(pos.max()) + 1)
        args = (idx.contiguous(), pos.contiguous(), seq.contiguous(), last.contiguous())
        return self.graphs["mixed"](*args, layer_caches(kv, span))
