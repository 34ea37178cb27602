"""Model configs: presets, JSON files and --set overrides; a key the model does not have is an error
naming the valid ones, never dropped (a typo would compile the default model)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpt_aot.model.config import resolve_config

AOT_DIR = Path(__file__).resolve().parents[2] / "aot"


def test_overrides_and_presets_resolve():
    assert resolve_config("tiny", []) == dict(block_size=32, n_layer=2, n_head=2, n_embd=32, bias=False)
    assert resolve_config("tiny", ["n_layer=3", "bias=true"]) == dict(
        block_size=32, n_layer=3, n_head=2, n_embd=32, bias=True
    )
    assert resolve_config("tiny", ["gelu=tanh"])["gelu"] == "tanh"  # not JSON: kept as text


# The four GPT-2 sizes as transformers' GPT2Config describes OpenAI's released models (the hub's config.json
# files: n_layer, n_head, n_embd; n_positions 1024 and vocab_size 50257 for all), written out here as literals.
@pytest.mark.parametrize(
    "preset, n_layer, n_head, n_embd",
    [("gpt2", 12, 12, 768), ("gpt2-medium", 24, 16, 1024), ("gpt2-large", 36, 20, 1280), ("gpt2-xl", 48, 25, 1600)],
)
def test_gpt2_presets_are_openais_sizes(preset, n_layer, n_head, n_embd):
    assert resolve_config(preset, []) == dict(
        block_size=1024, n_layer=n_layer, n_head=n_head, n_embd=n_embd, bias=True, vocab_size=50257
    )


def test_an_unknown_set_key_is_an_error_listing_the_valid_keys():
    with pytest.raises(
        ValueError, match=r"unknown config key 'n_layers' in --set n_layers=24: valid keys are .*n_layer"
    ):
        resolve_config("tiny", ["n_layers=24"])


def test_an_unknown_key_in_a_config_file_is_an_error(tmp_path):
    path = tmp_path / "model.json"
    path.write_text(json.dumps({"n_layer": 2, "n_embed": 64}))
    with pytest.raises(ValueError, match=rf"unknown config key 'n_embed' in config file {path}: valid keys are"):
        resolve_config(str(path), [])
    path.write_text(json.dumps({"n_layer": 2, "n_embd": 64}))
    assert resolve_config(str(path), []) == {"n_layer": 2, "n_embd": 64}


def test_compile_with_a_mistyped_key_fails_before_compiling(tmp_path):
    out = tmp_path / "never"
    env = {**os.environ, "PYTHONPATH": str(AOT_DIR)}
    run = subprocess.run(
        [sys.executable, "-m", "gpt_aot", "compile", "--config", "tiny", "--set", "n_layers=24", "-o", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert run.returncode != 0
    assert "unknown config key 'n_layers'" in run.stderr
    assert not out.exists()
