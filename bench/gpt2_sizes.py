"""The GPT-2 sizes the decode benchmarks compare, and where each size's files live under bench/work/.

One set of random weights per size (bench/server_weights.py --size: nanoGPT's init, Hugging Face layout, bf16)
is what every implementation starts from; bench/int8_weights.py --size converts it with each peer's own tools
and bench/int8_bench.py --size compiles ours from it. 124M's paths are the ones every earlier run used.
"""

from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "bench" / "work"

# GPT-2's published shapes; every size has GPT-2's vocabulary, context and biases.
SHAPES = {
    "124m": dict(n_layer=12, n_head=12, n_embd=768),
    "355m": dict(n_layer=24, n_head=16, n_embd=1024),
}
SIZES = tuple(SHAPES)


def config(size: str) -> dict:
    """nanoGPT's GPTConfig fields of `size` (GPT-2's tanh GELU, as its Hugging Face checkpoints)."""
    return dict(block_size=1024, vocab_size=50257, bias=True, gelu="tanh", **SHAPES[size])


@dataclass(frozen=True)
class Files:
    """One size's files: the shared weights, the peers' conversions, and where our artifacts go."""

    size: str

    @property
    def hf_dir(self) -> Path:  # config.json, model.safetensors (bf16), vocab.json, merges.txt
        return WORK / "server" / f"hf-gpt2-{self.size}"

    @property
    def bf16_gguf(self) -> Path:  # llama.cpp's convert_hf_to_gguf.py --outtype bf16
        return WORK / "server" / f"gpt2-{self.size}-bf16.gguf"

    def gguf(self, kind: str) -> Path:
        """llama.cpp's file of `kind` (bf16, q8_0, q4_0, q4_1, q4_k_m)."""
        return self.bf16_gguf if kind == "bf16" else WORK / "int8" / f"gpt2-{self.size}-{kind}.gguf"

    @property
    def ct2_dir(self) -> Path:  # CTranslate2's int8 conversion
        return WORK / "int8" / f"ct2-gpt2-{self.size}-int8"

    def artifact(self, weights: str) -> Path:
        """Our artifact of `weights` (bench/int8_bench.py's names: bf16, int8kernel, ...)."""
        return WORK / "int8" / f"gpt2-{self.size}-{weights}"

    @property
    def summary(self) -> Path:  # bench/int8_weights.py's account of the peers' files
        return WORK / "int8" / ("weights.json" if self.size == "124m" else f"weights-{self.size}.json")
