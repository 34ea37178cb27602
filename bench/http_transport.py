"""gpt-server's HTTP transport side by side: each named binary serves the same
artifact in turn, and each gets the same measurements, over loopback:

- throughput of cheap routes (GET /v1/models, GET /healthz) with `wrk` (keep-alive);
- a streamed completion's cost per token over the same completion unstreamed;
- another client's completion time while 30 slow-body, 50 slow-head or 500 idle
  connections are held open (the issue's attacks), and whether /readyz answers.

    .venv/bin/python bench/http_transport.py --model build/test_artifacts/tiny-flash \\
        --server beast=build/deploy/server/gpt-server --server httplib=/path/to/old/gpt-server \\
        --out bench/results/cpu-2026-11-27-http-transport

Writes results.json and results.md (with the CPU model and flags) to --out.
"""

import argparse
import http.client
import json
import platform
import re
import select
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

CLIENT_TIMEOUT = 15.0  # seconds: an attacked server that answers later counts as not answering


class Server:
    def __init__(self, binary: Path, model: Path, log: Path, extra: list[str] | None = None):
        self.log_path = log
        self.log = open(log, "w")
        # One model thread: the transport is measured, and OpenMP's barriers on a shared 2-core host would
        # make each decode step wait for a descheduled thread.
        args = [str(binary), "--model", str(model), "--port", "0", "--allow-unsigned", "--allow-cpu-fallback"]
        args += ["--threads", "1", *(extra or [])]
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            match = re.search(r"event=listening .*? port=(\d+)", log.read_text())
            if match:
                self.port = int(match.group(1))
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"{binary} exited: {log.read_text()}")
            time.sleep(0.05)
        raise RuntimeError(f"{binary} did not listen within 60 s")

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        self.log.close()


def help_of(binary: str) -> str:
    return subprocess.run([binary, "--help"], capture_output=True, text=True).stdout


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wrk(port: int, path: str, seconds: int = 5, connections: int = 16) -> float:
    out = subprocess.run(
        ["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", f"http://127.0.0.1:{port}{path}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))


def completion(port: int, stream: bool, max_tokens: int, timeout: float = CLIENT_TIMEOUT) -> float:
    """Seconds for one completion on a fresh connection, to its last byte; inf when it did not finish in time."""
    body = {"prompt": "a", "max_tokens": max_tokens, "ignore_eos": True, "temperature": 0, "stream": stream}
    started = time.monotonic()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        payload = resp.read()
        conn.close()
    except OSError:
        return float("inf")
    if resp.status != 200 or (stream and not payload.endswith(b"data: [DONE]\n\n")):
        return float("inf")
    return time.monotonic() - started


def probe(port: int, path: str, timeout: float = CLIENT_TIMEOUT) -> tuple[int, float]:
    started = time.monotonic()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        conn.request("GET", path)
        status = conn.getresponse().status
        conn.close()
    except OSError:
        return 0, float("inf")
    return status, time.monotonic() - started


def per_token_overhead_ms(port: int, tokens: int = 64, repeats: int = 7) -> dict:
    plain = statistics.median(completion(port, False, tokens) for _ in range(repeats))
    streamed = statistics.median(completion(port, True, tokens) for _ in range(repeats))
    return {
        "tokens": tokens,
        "plain_ms": 1e3 * plain,
        "streamed_ms": 1e3 * streamed,
        "overhead_ms_per_token": 1e3 * (streamed - plain) / tokens,
    }


class Attack:
    """`count` connections that each send `first` at once and then one byte of `rest` per second."""

    def __init__(self, port: int, count: int, first: bytes, rest: bytes):
        self.conns = []
        for _ in range(count):
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            if first:
                sock.sendall(first)
            self.conns.append(sock)
        self.rest, self._stop = rest, threading.Event()
        self._thread = threading.Thread(target=self._trickle)
        self._thread.start()

    def _trickle(self):
        for i in range(len(self.rest)):
            if self._stop.wait(1.0):
                return
            for sock in self.conns:
                try:
                    sock.send(self.rest[i : i + 1])
                except OSError:
                    pass

    def still_open(self) -> int:
        open_ = 0
        for sock in self.conns:
            sock.setblocking(False)
            try:
                open_ += sock.recv(1, socket.MSG_PEEK) != b""
            except BlockingIOError:
                open_ += 1
            except OSError:
                pass
        return open_

    def close(self):
        self._stop.set()
        self._thread.join()
        for sock in self.conns:
            sock.close()


def attacks(port: int) -> dict:
    slow_body_head = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 60000\r\n\r\n"
    kinds = {
        "slow_body_30": (30, slow_body_head, b"a" * 100),
        "slow_head_50": (50, b"P", b"OST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100),
        "idle_500": (500, b"", b""),
    }
    results = {}
    for name, (count, first, rest) in kinds.items():
        attack = Attack(port, count, first, rest)
        try:
            time.sleep(1.0)  # the attack is in place (each connection has sent a byte more)
            latencies = [completion(port, False, 4) for _ in range(3)]
            ready_status, ready_s = probe(port, "/readyz")
            healthz_status, healthz_s = probe(port, "/healthz")
            results[name] = {
                "completion_s_max": max(latencies),
                "answered_within_1s": max(latencies) < 1.0,
                "readyz": ready_status,
                "readyz_s": ready_s,
                "healthz_main_port_s": healthz_s if healthz_status == 200 else float("inf"),
                "attack_connections_open_after": attack.still_open(),
            }
        finally:
            attack.close()
        time.sleep(0.5)
    return results


def seconds_until_answered(port: int, first: bytes, rest: bytes, period: float = 0.5, limit: float = 12) -> dict:
    """A client that sends `first`, then one byte of `rest` every `period` s: when the server answers or
    closes (and the status it answered), or None when the connection is still open at `limit`."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(first)
        for i in range(len(rest)):
            readable = select.select([sock], [], [], period)[0]
            if readable or time.monotonic() - started > limit:
                break
            try:
                sock.send(rest[i : i + 1])
            except OSError:
                break
        waited = time.monotonic() - started
        if waited > limit:
            return {"seconds": None, "status": None}
        sock.settimeout(2)
        try:
            data = sock.recv(4096)
        except OSError:
            data = b""
        status = int(data.split()[1]) if data.startswith(b"HTTP/") else None
        return {"seconds": time.monotonic() - started, "status": status}


def framing_status(port: int, path: str, head: bytes, body: bytes) -> str:
    """The status a request with this framing gets, with the start of its error message: a 400 from the
    route (its body read one way, not valid JSON) is not the transport's refusal."""
    raw = f"POST {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n".encode() + head + b"\r\n" + body
    data = b""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(raw)
            while chunk := sock.recv(65536):
                data += chunk
    except OSError:
        pass
    if not data.startswith(b"HTTP/"):
        return "no answer"
    status = data.split()[1].decode()
    try:
        message = json.loads(data.partition(b"\r\n\r\n")[2])["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return status
    return f"{status} ({message[:48]})"


def transport_checks(port: int, post_path: str) -> dict:
    """The limits themselves, with the server's deadlines (or timeout) at 2 s: the same for every candidate."""
    slow = b"a" * 100
    post = f"POST {post_path} HTTP/1.1\r\nHost: x\r\nContent-Length: 60000\r\n\r\n".encode()
    return {
        "rps_healthz": wrk(port, "/healthz"),
        "slow_head": seconds_until_answered(port, b"G", b"ET /healthz HTTP/1.1\r\nX-Slow: " + slow),
        "slow_body": seconds_until_answered(port, post, slow),
        # Either length reads valid JSON (14 bytes, or the same and a space): accepted unless the framing is refused.
        "two_lengths": framing_status(
            port, post_path, b"Content-Length: 14\r\nContent-Length: 15\r\n", b'{"prompt":"a"} '
        ),
        # Read as chunked it is valid JSON; read by its length it is not.
        "length_and_chunked": framing_status(
            port,
            post_path,
            b"Content-Length: 14\r\nTransfer-Encoding: chunked\r\n",
            b'e\r\n{"prompt":"a"}\r\n0\r\n\r\n',
        ),
    }


def cpu_description() -> dict:
    text = Path("/proc/cpuinfo").read_text()
    field = lambda name: re.search(rf"^{name}\s*:\s*(.*)$", text, re.MULTILINE).group(1)  # noqa: E731
    return {"model": field("model name"), "flags": field("flags"), "cores": text.count("processor\t:")}


def fmt(seconds: float) -> str:
    return f"> {CLIENT_TIMEOUT:g} s (no answer)" if seconds == float("inf") else f"{seconds * 1e3:.0f} ms"


def report(results: dict, cpu: dict) -> str:
    names = list(results["servers"])
    lines = [
        "# gpt-server HTTP transports side by side",
        "",
        f"`bench/http_transport.py`, {results['date']}, commit {results['commit']}, model `{results['model']}`.",
        f"Host: {cpu['model']}, {cpu['cores']} cores (shared with other jobs), {platform.platform()}.",
        "Each server in turn, alone, default options (`--parallel 4 --max-queue 16`) but `--threads 1`.",
        "",
        "| measurement | " + " | ".join(names) + " |",
        "|---" * (len(names) + 1) + "|",
    ]

    def row(label, value):
        lines.append(f"| {label} | " + " | ".join(value(results["servers"][n]) for n in names) + " |")

    row("GET /v1/models, wrk 2 threads 16 connections, req/s", lambda r: f"{r['rps_models']:.0f}")
    row("GET /healthz, same, req/s", lambda r: f"{r['rps_healthz']:.0f}")
    row("64-token completion, plain (median of 7)", lambda r: f"{r['stream']['plain_ms']:.1f} ms")
    row("64-token completion, streamed (median of 7)", lambda r: f"{r['stream']['streamed_ms']:.1f} ms")
    row("streaming cost per token", lambda r: f"{r['stream']['overhead_ms_per_token'] * 1e3:.0f} µs")
    for attack in ("slow_body_30", "slow_head_50", "idle_500"):
        row(
            f"{attack}: another client's completion (worst of 3)",
            lambda r, a=attack: fmt(r["attacks"][a]["completion_s_max"]),
        )
        row(
            f"{attack}: /readyz on the main port",
            lambda r, a=attack: f"{r['attacks'][a]['readyz']} in {fmt(r['attacks'][a]['readyz_s'])}",
        )
        row(f"{attack}: /healthz on the main port", lambda r, a=attack: fmt(r["attacks"][a]["healthz_main_port_s"]))
    if results.get("checks"):
        checks = results["checks"]
        names = list(checks)
        lines += [
            "",
            "The limits themselves, each candidate with a 2 s deadline or timeout (gpt-server: `--header-timeout 2"
            " --body-timeout 2`; cpp-httplib: `--header-timeout 2`, its body reads wait 30 s each; libmicrohttpd:"
            " `MHD_OPTION_CONNECTION_TIMEOUT` 2, an inactivity timeout), one client sending a byte every 0.5 s:",
            "",
            "| check | " + " | ".join(names) + " |",
            "|---" * (len(names) + 1) + "|",
        ]

        def answered(r):
            return (
                "still open at 12 s"
                if r["seconds"] is None
                else f"{r['status'] or 'closed'} after {r['seconds']:.1f} s"
            )

        for label, value in [
            ("GET /healthz, wrk 2 threads 16 connections, req/s", lambda r: f"{r['rps_healthz']:.0f}"),
            ("head sent a byte every 0.5 s", lambda r: answered(r["slow_head"])),
            ("body (Content-Length 60000) sent a byte every 0.5 s", lambda r: answered(r["slow_body"])),
            ("two Content-Length headers, 14 and 15", lambda r: r["two_lengths"]),
            ("Content-Length and Transfer-Encoding: chunked", lambda r: r["length_and_chunked"]),
        ]:
            lines.append(f"| {label} | " + " | ".join(value(checks[n]) for n in names) + " |")
    lines += ["", f"CPU flags: `{cpu['flags']}`", ""]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--server", action="append", required=True, help="NAME=BINARY, measured in this order")
    parser.add_argument(
        "--prototype",
        action="append",
        default=[],
        help="NAME=BINARY of a bare server (bench/mhd_prototype.c): checks only",
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--checks-only", action="store_true", help="redo the checks table of --out's results.json")
    args = parser.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    results = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": commit, "model": args.model.name}
    results["servers"] = {}
    if args.checks_only:
        results = json.loads((args.out / "results.json").read_text())
    with tempfile.TemporaryDirectory() as logs:
        for spec in [] if args.checks_only else args.server:
            name, _, binary = spec.partition("=")
            server = Server(Path(binary), args.model, Path(logs) / f"{name}.log")
            try:
                completion(server.port, False, 4)  # warm-up
                results["servers"][name] = {
                    "binary": binary,
                    "rps_models": wrk(server.port, "/v1/models"),
                    "rps_healthz": wrk(server.port, "/healthz"),
                    "stream": per_token_overhead_ms(server.port),
                    "attacks": attacks(server.port),
                }
            finally:
                server.stop()
            print(name, json.dumps(results["servers"][name]), flush=True)
    results["checks"] = {}
    with tempfile.TemporaryDirectory() as logs:
        for spec in args.server:
            name, _, binary = spec.partition("=")
            extra = ["--header-timeout", "2"] + (["--body-timeout", "2"] if "--body-timeout" in help_of(binary) else [])
            server = Server(Path(binary), args.model, Path(logs) / f"{name}.log", extra)
            try:
                results["checks"][name] = transport_checks(server.port, "/v1/completions")
            finally:
                server.stop()
        for spec in args.prototype:
            name, _, binary = spec.partition("=")
            port = free_port()
            proc = subprocess.Popen([binary, str(port)], stdout=subprocess.PIPE, text=True)
            try:
                proc.stdout.readline()  # event=listening
                results["checks"][name] = transport_checks(port, "/echo")
            finally:
                proc.kill()
                proc.wait()
        print("checks", json.dumps(results["checks"]), flush=True)
    cpu = cpu_description()
    results["cpu"] = cpu
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    (args.out / "results.md").write_text(report(results, cpu))


if __name__ == "__main__":
    main()
