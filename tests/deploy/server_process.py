"""A gpt-server process for the tests: on a free loopback port, its log in a file,
killed at the end of its test. The binary comes from GPT_SERVER (scripts/test.sh
sets it) or build/. Every wait is bounded.
"""

import http.client
import json
import os
import secrets
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERVER = Path(os.environ.get("GPT_SERVER", ROOT / "build" / "deploy" / "server" / "gpt-server"))
CLI = Path(os.environ.get("GPT_CLI", ROOT / "build" / "cli" / "gpt"))


class Server:
    """A gpt-server process on a free loopback port, with its log in a file."""

    def __init__(self, tmp_path: Path, model: Path, *flags: str, env: dict | None = None):
        self.log_path = tmp_path / f"server-{time.monotonic_ns()}.log"
        self.log = open(self.log_path, "w")
        # The test models are CPU artifacts: on a GPU host the server must be allowed to serve them. They are
        # unsigned too: served with --allow-unsigned, unless the test gives trusted keys (then signed ones only).
        args = [
            str(SERVER),
            "--model",
            str(model),
            "--port",
            "0",
            "--log-level",
            "info",
            "--allow-cpu-fallback",
            *([] if "--trusted-keys" in flags else ["--allow-unsigned"]),
            *flags,
        ]
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
        self.port = self._wait_for_port()

    def _wait_for_port(self) -> int:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for line in self.log_path.read_text().splitlines():
                if "event=listening" in line:
                    return int(line.split("port=")[1].split()[0])
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited {self.proc.returncode}:\n{self.log_path.read_text()}")
            time.sleep(0.05)
        raise AssertionError("server did not start listening within 60 s")

    def request(self, method: str, path: str, body=None, timeout: float = 30, headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        data = body if isinstance(body, (bytes, str)) or body is None else json.dumps(body)
        conn.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
        resp = conn.getresponse()
        payload = resp.read().decode()
        conn.close()
        return resp.status, payload

    def generate(self, **body):
        status, payload = self.request("POST", "/v1/generate", body)
        return status, json.loads(payload)

    def stream(self, timeout: float = 30, **body):
        """Opens a streaming generation; yields (event, data) as they arrive."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        conn.request("POST", "/v1/generate", body=json.dumps({**body, "stream": True}))
        resp = conn.getresponse()
        assert resp.status == 200, resp.read()
        assert resp.getheader("Content-Type").startswith("text/event-stream")
        return conn, resp, read_events(resp)

    def log_text(self) -> str:
        return self.log_path.read_text()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.log.close()


def admin_flags(tmp_path: Path, models_root: Path) -> tuple[list[str], dict]:
    """The flags that turn /admin/* on, and the header that authenticates a call to it."""
    token = secrets.token_hex(32)
    token_file = tmp_path / "admin.token"
    token_file.write_text(token + "\n")
    token_file.chmod(0o600)
    flags = ["--admin", "--admin-token-file", str(token_file), "--models-root", str(models_root)]
    return flags, {"Authorization": f"Bearer {token}"}


def read_events(resp):
    event = None
    while True:
        line = resp.readline()
        if not line:
            return
        line = line.decode().rstrip("\n")
        if line.startswith("event: "):
            event = line[len("event: ") :]
        elif line.startswith("data: "):
            yield event, json.loads(line[len("data: ") :])


def vm_rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for process {pid}")
