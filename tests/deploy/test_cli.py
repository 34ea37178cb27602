"""The gpt CLI's options: what the runtime would refuse is refused before the model is loaded, with the
runtime's message; generate, info and verify take --allow-cpu-fallback like `gpt artifacts` and gpt-server."""

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLI = Path(os.environ.get("GPT_CLI", ROOT / "build" / "cli" / "gpt"))

pytestmark = pytest.mark.skipif(not CLI.exists(), reason=f"gpt CLI not built at {CLI}")

SAMPLING = "need temperature >= 0, top_k >= 0 and 0 < top_p <= 1"


def gpt(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "GPT_LOG": "info"}  # a load would log "loaded ..."
    return subprocess.run([str(CLI), *args], capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.parametrize(
    "option, message",
    [
        ("--top-p=0", SAMPLING),
        ("--top-p=1.5", SAMPLING),
        ("--top-p=nan", SAMPLING),
        ("--temperature=-0.5", SAMPLING),
        ("--top-k=-1", SAMPLING),
        ("--max-new-tokens=0", "max_new_tokens must be > 0"),
        ("--max-new-tokens=-3", "max_new_tokens must be > 0"),
    ],
)
def test_generate_refuses_what_the_runtime_refuses_before_loading(artifacts, option, message):
    run = gpt("generate", str(artifacts / "tiny-flash" / "cpu"), "--prompt-ids", "1", "2", option)
    assert run.returncode != 0
    assert f"GPT_ERR_INVALID_ARGUMENT: {message}" in run.stderr
    assert "loaded" not in run.stderr  # refused before the load
    assert run.stdout == ""


def test_generate_info_and_verify_accept_allow_cpu_fallback(artifacts):
    model_dir = artifacts / "tiny-flash"  # a model directory: selection picks its cpu target
    for args in (
        ("info", str(model_dir)),
        ("verify", str(model_dir)),
        ("generate", str(model_dir), "--prompt-ids", "1", "2", "-n", "3", "--temperature", "0"),
    ):
        run = gpt(*args, "--allow-cpu-fallback")
        assert run.returncode == 0, (args, run.stderr)
        assert "loaded" in run.stderr
