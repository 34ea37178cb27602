"""The "plain AOTInductor" peer: the same exported prefill and decode graphs,
compiled with AOTInductor's defaults (weights packaged with the code), for
bench/aoti_bench.cpp to run through AOTIModelPackageLoader alone.

  python bench/aoti_plain.py --config JSON --attention K --seed S --device cpu --dtype fp32 -o DIR
"""

import argparse
import json
import time
from pathlib import Path

import torch

from gpt_aot.artifact.manifest import FORMAT_VERSION
from gpt_aot.compiler.graphs import export_graphs
from gpt_aot.compiler.target import DTYPES
from gpt_aot.model.attention import attention_context
from gpt_aot.model.gpt import GPT, GPTConfig


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--config", required=True, help="GPTConfig as JSON")
    p.add_argument("--attention", required=True, help="the prefill's kind (and the decode's by default)")
    p.add_argument("--decode-attention", help="the decode's kind")
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="fp32")
    p.add_argument("-o", "--output", required=True)
    args = p.parse_args()
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    model = GPT(GPTConfig.from_dict(json.loads(args.config)), args.attention).init_weights(args.seed)
    model = model.to(args.device, DTYPES[args.dtype]).eval()
    t0 = time.perf_counter()
    kinds = {"prefill": args.attention, "decode": args.decode_attention or args.attention}
    for name, program in export_graphs(model, kinds, max_batch=8).items():
        with attention_context(kinds[name]):
            torch._inductor.aoti_compile_and_package(program, package_path=str(out / f"{name}.pt2"))
    # bench/suite.py reuses these packages while the artifact format is the one recorded here.
    timing = {"seconds": time.perf_counter() - t0, "format_version": FORMAT_VERSION}
    (out / "compile.json").write_text(json.dumps(timing))


if __name__ == "__main__":
    main()
