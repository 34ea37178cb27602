"""Unsigned native code never loads quietly: an artifact is a shared library the process runs. gpt-server does
not start without trusted keys unless told --allow-unsigned, the gpt CLI warns on stderr when it loads an
artifact whose signature nothing checked, and no unauthenticated reply shows where an artifact lies on disk
(the model's name stands for it).

The server binary comes from GPT_SERVER (scripts/test.sh sets it) or build/; every wait is bounded.
"""

import http.client
import json
import os
import re
import shutil
import subprocess

import pytest
from server_process import CLI, ROOT, SERVER

from gpt_aot.artifact import signing

pytestmark = pytest.mark.skipif(not SERVER.exists(), reason=f"gpt-server not built at {SERVER}")


def without_keys() -> dict:
    return {k: v for k, v in os.environ.items() if k != "GPT_TRUSTED_KEYS"}


def start(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """A server that must refuse to start: it exits on its own."""
    return subprocess.run(
        [str(SERVER), "--port", "0", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env if env is not None else without_keys(),
    )


def test_the_server_refuses_an_unsigned_artifact_without_keys_unless_allowed(serve, artifacts, tmp_path):
    flash = artifacts / "tiny-flash"
    config = ROOT / "deploy" / "server" / "gpt-server.toml"
    for args in (["--model", str(flash)], ["--config", str(config), "--model", str(flash)]):
        refused = start(*args)
        assert refused.returncode != 0, refused.stderr
        assert "--allow-unsigned" in refused.stderr and "no trusted keys" in refused.stderr, refused.stderr
        assert "event=listening" not in refused.stderr  # refused before anything loads or listens

    # Keys from the environment count as keys: with them the unsigned artifact is the runtime's refusal.
    secret, public = signing.generate_keypair(tmp_path / "release")
    refused = start("--model", str(flash), env={**without_keys(), "GPT_TRUSTED_KEYS": str(public)})
    assert refused.returncode != 0 and "GPT_ERR_ARTIFACT_SIGNATURE" in refused.stderr, refused.stderr

    # Both at once contradict each other: keys mean signed artifacts only.
    for env in ({"GPT_TRUSTED_KEYS": str(public)}, {}):
        flags = [] if env else ["--trusted-keys", str(public)]
        both = start("--model", str(flash), "--allow-unsigned", *flags, env={**without_keys(), **env})
        assert both.returncode != 0 and "--allow-unsigned" in both.stderr and "contradicts" in both.stderr, both.stderr

    server = serve(flash)  # the harness passes --allow-unsigned
    assert server.generate(prompt="a", max_tokens=2)[0] == 200
    assert "event=signatures_off" in server.log_text()  # said at warn level

    signed = shutil.copytree(flash, tmp_path / "signed")
    signing.sign_artifact(signed / "cpu", secret)
    server = serve(signed, "--trusted-keys", str(public))  # keys: no --allow-unsigned needed
    assert server.generate(prompt="a", max_tokens=2)[0] == 200
    assert "event=signatures_off" not in server.log_text()


def get(port: int, method: str, path: str, body=None) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request(method, path, body=None if body is None else json.dumps(body))
    resp = conn.getresponse()
    text = "\n".join(f"{k}: {v}" for k, v in resp.getheaders()) + "\n\n" + resp.read().decode()
    conn.close()
    return resp.status, text


def test_no_unauthenticated_reply_shows_the_artifacts_path(serve, artifacts, tmp_path):
    where = tmp_path / "deploy-root-7f3a9c"  # a name nothing else would print
    model = shutil.copytree(artifacts / "tiny-flash", where / "models" / "tiny-flash")
    server = serve(model, "--health-port", "0")
    health_port = int(re.search(r"event=listening .* health_port=(\d+)", server.log_text()).group(1))
    replies = {}
    for port in (server.port, health_port):
        for path in ("/healthz", "/readyz", "/metrics"):
            replies[f"{port} GET {path}"] = get(port, "GET", path)
    for method, path, body in [
        ("GET", "/v1/models", None),
        ("POST", "/v1/generate", {"prompt": "a", "max_tokens": 3, "seed": 1}),
        ("POST", "/v1/generate", {"prompt": "a", "max_tokens": 3, "seed": 1, "stream": True}),
        ("POST", "/v1/completions", {"prompt": "a", "max_tokens": 3, "seed": 1}),
        ("POST", "/v1/completions", {"prompt": "a", "max_tokens": 3, "seed": 1, "stream": True}),
        ("POST", "/v1/completions", {"prompt": "a", "model": "another-model"}),  # 404 names the served model
        ("POST", "/tokenize", {"prompt": "a"}),
    ]:
        replies[f"{method} {path} {body}"] = get(server.port, method, path, body)

    for what, (status, text) in replies.items():
        assert status in (200, 404), (what, status, text)
        for needle in (str(where), str(where.resolve()), str(artifacts)):
            assert needle not in text, (what, needle, text)
    assert json.loads(replies["GET /v1/models None"][1].split("\n\n", 1)[1])["data"][0]["id"] == "tiny-flash"
    assert 'gpt_model_info{name="tiny-flash"} 1' in replies[f"{server.port} GET /metrics"][1]
    generated = json.loads(replies["POST /v1/generate {'prompt': 'a', 'max_tokens': 3, 'seed': 1}"][1].split("\n\n")[1])
    assert generated["model"] == "tiny-flash" and generated["completion_tokens"] == 3


def test_the_cli_warns_when_it_loads_an_artifact_whose_signature_nothing_checked(artifacts, tmp_path):
    flash = artifacts / "tiny-flash" / "cpu"

    def gpt(*args: str, env: dict) -> subprocess.CompletedProcess:
        return subprocess.run([str(CLI), *args], capture_output=True, text=True, timeout=300, env=env)

    for args in (("info", str(flash)), ("verify", str(flash))):
        run = gpt(*args, env=without_keys())
        assert run.returncode == 0, run.stderr
        assert "warning" in run.stderr and "unverified" in run.stderr and "GPT_TRUSTED_KEYS" in run.stderr, run.stderr

    secret, public = signing.generate_keypair(tmp_path / "release")
    signed = shutil.copytree(flash, tmp_path / "signed")
    signing.sign_artifact(signed, secret)
    run = gpt("info", str(signed), env={**without_keys(), "GPT_TRUSTED_KEYS": str(public)})
    assert run.returncode == 0, run.stderr
    assert "warning" not in run.stderr, run.stderr
    refused = gpt("info", str(flash), env={**without_keys(), "GPT_TRUSTED_KEYS": str(public)})
    assert refused.returncode != 0 and "GPT_ERR_ARTIFACT_SIGNATURE" in refused.stderr, refused.stderr
