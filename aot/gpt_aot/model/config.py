"""Named model configurations, plus JSON files and key=value overrides."""

import json
from pathlib import Path

from gpt_aot.model.gpt import GPTConfig

PRESETS = {
    # Test-sized: compiles in seconds on one core.
    "tiny": dict(block_size=32, n_layer=2, n_head=2, n_embd=32, bias=False),
    # The README demo: a char-level model that trains in minutes on 2 cores.
    "char-small": dict(block_size=128, n_layer=4, n_head=4, n_embd=128, bias=False),
    # The seed benchmark's model (85M parameters with GPT-2's padded vocab).
    "seed-85m": dict(block_size=1024, n_layer=12, n_head=12, n_embd=768, bias=False, vocab_size=50304),
    # GPT-2 small (124M), medium (355M), large (774M) and XL (1.5B): OpenAI's released sizes, 64-wide heads.
    "gpt2": dict(block_size=1024, n_layer=12, n_head=12, n_embd=768, bias=True, vocab_size=50257),
    "gpt2-medium": dict(block_size=1024, n_layer=24, n_head=16, n_embd=1024, bias=True, vocab_size=50257),
    "gpt2-large": dict(block_size=1024, n_layer=36, n_head=20, n_embd=1280, bias=True, vocab_size=50257),
    "gpt2-xl": dict(block_size=1024, n_layer=48, n_head=25, n_embd=1600, bias=True, vocab_size=50257),
}


def parse_value(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _check_keys(keys, source: str) -> None:
    """A key GPTConfig does not have would be dropped silently (n_layers=24 compiling the default depth)."""
    valid = GPTConfig.__dataclass_fields__
    unknown = sorted(k for k in keys if k not in valid)
    if unknown:
        raise ValueError(
            f"unknown config key {', '.join(map(repr, unknown))} in {source}: valid keys are {', '.join(valid)}"
        )


def resolve_config(spec: str | None, overrides: list[str]) -> dict:
    """Preset name or JSON file, then `key=value` overrides, as a plain dict. Unknown keys are an error."""
    config = {}
    if spec:
        if spec in PRESETS:
            config = dict(PRESETS[spec])
        elif Path(spec).is_file():
            config = json.loads(Path(spec).read_text())
            if not isinstance(config, dict):
                raise ValueError(f"config file {spec} must hold a JSON object")
            _check_keys(config, f"config file {spec}")
        else:
            raise ValueError(f"unknown config {spec!r}: a preset ({', '.join(PRESETS)}) or a JSON file")
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"override {item!r} is not key=value")
        _check_keys([key.strip()], f"--set {item}")
        config[key.strip()] = parse_value(value.strip())
    return config
