"""CTranslate2 in a process that has loaded the kernel library: the same greedy tokens as in a process of its own?

The compiled graphs bind the kernel library's C functions in the process's global scope; what else is there, a
library loaded later binds to. Until 2026-11-30 making them global took libtorch_cpu along, and CTranslate2's
bundled GEMM calls then ran on torch's MKL: other tokens. This runs a small random GPT-2 (4 layers, 256 wide,
saved with transformers' save_pretrained, converted by CTranslate2's own converter to int8) greedy from the same
prompt in three fresh processes: CTranslate2 alone, after `gpt_aot.model.kernels.load()`, and after libtorch_cpu
was opened RTLD_GLOBAL (the old behaviour, for contrast). Needs bench/requirements.txt (ctranslate2).

    .venv/bin/python bench/ct2_beside_kernels.py OUT_DIR   -> OUT_DIR/tokens.json
"""

import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

MAKE = """
import sys, torch, transformers
from ctranslate2.converters import TransformersConverter
from tokenizers import Tokenizer, models, pre_tokenizers
torch.manual_seed(0)
hf, ct2 = sys.argv[1], sys.argv[2]
config = transformers.GPT2Config(n_layer=4, n_embd=256, n_head=4, vocab_size=1024, n_positions=256)
transformers.GPT2LMHeadModel(config).eval().save_pretrained(hf)
words = Tokenizer(models.WordLevel({str(i): i for i in range(1024)}, unk_token="0"))
words.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
fast = transformers.PreTrainedTokenizerFast(tokenizer_object=words, bos_token="1", eos_token="2", unk_token="0")
fast.save_pretrained(hf)
TransformersConverter(hf).convert(ct2, quantization="int8", force=True)
"""

GENERATE = """
import ctypes, os, sys
mode, ct2 = sys.argv[1], sys.argv[2]
if mode == "after_kernel_library":
    import gpt_aot
    from gpt_aot.model import kernels
    kernels.load()
elif mode == "after_libtorch_global":
    import torch
    ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"), mode=ctypes.RTLD_GLOBAL)
import ctranslate2
generator = ctranslate2.Generator(ct2, device="cpu", compute_type="int8", intra_threads=2)
out = generator.generate_batch([["1", "2", "3", "4"]], max_length=24, sampling_topk=1, include_prompt_in_result=False)
print(out[0].sequences_ids[0])
"""

MODES = ("alone", "after_kernel_library", "after_libtorch_global")


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    env = {"PYTHONPATH": str(ROOT / "aot"), "PATH": "/usr/bin:/bin"}
    with tempfile.TemporaryDirectory() as tmp:
        hf, ct2 = Path(tmp) / "hf", Path(tmp) / "ct2"
        subprocess.run([sys.executable, "-c", MAKE, str(hf), str(ct2)], check=True, env=env, capture_output=True)
        tokens = {}
        for mode in MODES:
            done = subprocess.run(
                [sys.executable, "-c", GENERATE, mode, str(ct2)], env=env, capture_output=True, text=True
            )
            if done.returncode != 0:
                raise SystemExit(f"{mode}: {done.stderr[-2000:]}")
            tokens[mode] = json.loads(done.stdout.strip().splitlines()[-1])
    result = {"tokens": tokens, "same_as_alone": {mode: tokens[mode] == tokens["alone"] for mode in MODES[1:]}}
    (out / "tokens.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result["same_as_alone"]))


if __name__ == "__main__":
    main()
