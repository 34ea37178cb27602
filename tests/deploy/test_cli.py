"""The gpt CLI's options: what the runtime would refuse is refused before the model is loaded, with the
runtime's message; generate, info and verify take --allow-cpu-fallback like `gpt artifacts` and gpt-server."""

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLI = Path(os.environ.get("GPT_CLI", ROOT / "build" / "cli" / "gpt"))

pytestmark = pytest.mark.skipif(not CLI.exists(), reason=f"gpt CLI not built at {CLI}")

SAMPLING = "need temperature >= 0, top_k >= 0 and 0 < top_p <= 1"


def gpt(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "GPT_LOG": "info", **(env or {})}  # a load would log "loaded ..."
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


def test_a_host_whose_kernel_hides_an_extension_loads_what_it_compiled_and_refuses_what_would_use_it(
    artifacts, fixtures
):
    """The runtime and the compile read one description of the CPU (cpuinfo, here the fixture GPT_CPUINFO names):
    tiny-other, compiled natively as on that host, loads there; tiny-math, compiled where the extension is shown,
    is refused naming it."""
    from gpt_aot.compiler import isa

    cpuinfo = artifacts / fixtures.HIDDEN_CPUINFO
    (hidden,) = set(isa.cpu_flags()) - isa.cpu_flags(cpuinfo.read_text())

    def gpt_on_that_host(*args: str) -> subprocess.CompletedProcess:
        return gpt(*args, env={isa.CPUINFO_ENV: str(cpuinfo)})

    report = json.loads(gpt_on_that_host("artifacts", "inspect", str(artifacts / "tiny-other")).stdout)
    assert set(report["host"]["cpu_flags"]) == isa.cpu_flags(cpuinfo.read_text())  # one reading of one file
    assert report["targets"][0]["loads_here"], report["targets"][0]
    verify = gpt_on_that_host("verify", str(artifacts / "tiny-other" / "cpu"))
    assert verify.returncode == 0, verify.stderr
    refused = gpt_on_that_host("verify", str(artifacts / "tiny-math" / "cpu"))
    assert refused.returncode != 0
    assert "GPT_ERR_DEVICE_MISMATCH" in refused.stderr and f"may use {hidden}," in refused.stderr
    # this machine as it is runs both
    assert gpt("verify", str(artifacts / "tiny-math" / "cpu")).returncode == 0
