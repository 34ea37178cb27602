"""gpt-server over loopback with a real HTTP client: generation, SSE streaming,
Prometheus metrics, request errors, admission, hot swap under load, SIGTERM.

The server binary comes from GPT_SERVER (scripts/test.sh sets it) or build/.
Every wait is bounded; every server is killed at the end of its test.
"""

import json
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from safetensors.torch import load_file
from server_process import CLI, ROOT, SERVER, Server, admin_flags, vm_rss_bytes

from gpt_aot.artifact import signing

pytestmark = pytest.mark.skipif(not SERVER.exists(), reason=f"gpt-server not built at {SERVER}")


@pytest.fixture(scope="module")
def model_dirs(artifacts):
    return {name: artifacts / f"tiny-{name}" for name in ("flash", "other")}


@pytest.fixture(scope="module")
def shared_server(model_dirs, tmp_path_factory):
    """One default server for the tests that only send requests."""
    server = Server(tmp_path_factory.mktemp("server"), model_dirs["flash"])
    yield server
    server.stop()


def test_generate_matches_the_cli_and_is_seeded(serve, model_dirs, fixtures):
    server = serve(model_dirs["flash"])
    params = dict(prompt="Hello", max_tokens=24, temperature=0.8, top_k=20, seed=5)
    status, body = server.generate(**params)
    assert status == 200, body
    assert body["model"] == "tiny-flash" and body["completion_tokens"] == 24 and body["finish_reason"] == "length"
    assert "artifact" not in body  # the model's name, never its directory (test_unsigned.py)
    assert f"from {model_dirs['flash'] / 'cpu'} " in server.log_text()  # the model directory's cpu target was selected
    assert body["text"] == "".join(fixtures.VOCAB[t] for t in body["tokens"])
    # The same request through the gpt CLI (same runtime, same sampler) prints the same text.
    args = "-p Hello -n 24 --temperature 0.8 --top-k 20 --seed 5".split()
    cli = subprocess.run(
        [str(CLI), "generate", str(model_dirs["flash"]), *args], capture_output=True, text=True, timeout=60, check=True
    )
    assert cli.stdout == "Hello" + body["text"] + "\n"
    assert server.generate(**params)[1]["tokens"] == body["tokens"]
    assert server.generate(**{**params, "seed": 6})[1]["tokens"] != body["tokens"]


def test_stream_sends_each_token_then_done(serve, model_dirs):
    server = serve(model_dirs["flash"])
    _, whole = server.generate(prompt="Hi", max_tokens=16, seed=3)
    conn, _, events = server.stream(prompt="Hi", max_tokens=16, seed=3)
    events = list(events)
    conn.close()
    tokens = [data for kind, data in events if kind == "token"]
    assert [t["token"] for t in tokens] == whole["tokens"]
    assert "".join(t["text"] for t in tokens) == whole["text"]
    kind, done = events[-1]
    assert kind == "done" and done["completion_tokens"] == 16 and done["finish_reason"] == "length"


def test_a_bpe_model_serves_text_streamed_in_whole_characters(serve, artifacts):
    # tiny-bpe: GPT-2 layout, byte-level BPE (tests/fixtures/build_artifacts.py). A prompt with a
    # character the corpus lacks ("😀" is four byte tokens) is text like any other.
    from gpt_aot.text.tokenizer import to_tiktoken

    server = serve(artifacts / "tiny-bpe")
    enc = to_tiktoken(json.loads((artifacts / "tiny-bpe" / "cpu" / "tokenizer.json").read_text()))
    params = dict(prompt="In the beginning 😀", max_tokens=24, temperature=1.0, seed=11)
    status, body = server.generate(**params)
    assert status == 200, body
    assert body["prompt_tokens"] == len(enc.encode_ordinary(params["prompt"]))
    # The tokens' bytes decoded as a stream: U+FFFD for bytes that never form a character, and for a
    # character left incomplete by the last token, as the CLI prints it (bytes.decode(errors="replace")).
    raw = b"".join(enc.decode_single_token_bytes(t) for t in body["tokens"])
    assert body["text"] == raw.decode("utf-8", errors="replace")
    assert body["finish_reason"] in ("length", "stop")
    assert (body["finish_reason"] == "stop") == (body["completion_tokens"] < 24)
    conn, _, events = server.stream(**params)
    events = list(events)
    conn.close()
    pieces = [data["text"] for kind, data in events if kind == "token"]
    assert "".join(pieces) == body["text"]  # every piece was whole characters (JSON carries no broken ones)


def test_metrics_parse_as_prometheus_text(serve, model_dirs):
    server = serve(model_dirs["flash"])  # its own server: the counts below are exact
    for _ in range(3):
        assert server.generate(prompt="a", max_tokens=5)[0] == 200
    assert server.generate(prompt="a", max_tokens=0)[0] == 400
    status, text = server.request("GET", "/metrics")
    assert status == 200
    families = {f.name: f for f in text_string_to_metric_families(text)}
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families.values() for s in f.samples}
    assert samples[("gpt_requests_total", (("code", "200"), ("endpoint", "/v1/generate")))] == 3
    assert samples[("gpt_requests_total", (("code", "400"), ("endpoint", "/v1/generate")))] == 1
    assert samples[("gpt_tokens_generated_total", ())] == 15
    assert families["gpt_time_to_first_token_seconds"].type == "histogram"
    assert samples[("gpt_time_to_first_token_seconds_count", ())] == 3
    assert samples[("gpt_token_latency_seconds_count", ())] == 3 * 4  # gaps between 5 tokens
    assert samples[("gpt_queue_depth", ())] == 0
    assert samples[("gpt_model_info", (("name", "tiny-flash"),))] == 1


def _stored_and_packed_bytes(artifact: Path) -> int:
    """The weights file's tensors, each once, and the copies the runtime packs: one
    per weight a graph's `linear.packed` lists, tied names read through `weights.tied`."""
    manifest = json.loads((artifact / "manifest.json").read_text())
    weights = load_file(artifact / manifest["weights"]["file"])
    tied = manifest["weights"].get("tied", {})
    packed = {n for g in manifest["graphs"].values() for n in g.get("linear", {}).get("packed", [])}
    assert packed, "this artifact packs weights: the sum below is not just the stored tensors"
    return sum(t.nbytes for t in weights.values()) + sum(weights[tied.get(n, n)].nbytes for n in packed)


def test_metrics_report_the_models_memory(serve, model_dirs):
    server = serve(model_dirs["flash"])
    assert server.generate(prompt="a", max_tokens=5)[0] == 200
    _, text = server.request("GET", "/metrics")
    rss_now = vm_rss_bytes(server.proc.pid)
    families = {f.name: f for f in text_string_to_metric_families(text)}
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families.values() for s in f.samples}
    weights = samples[("gpt_model_weights_bytes", ())]
    assert weights == _stored_and_packed_bytes(model_dirs["flash"] / "cpu")
    for kind in ("allocated", "peak", "reserved"):  # a CPU model holds nothing on a GPU
        assert samples[("gpt_device_memory_bytes", (("kind", kind),))] == 0
    resident = samples[("process_resident_memory_bytes", ())]
    assert weights < resident <= samples[("gpt_process_peak_resident_memory_bytes", ())]
    assert abs(resident - rss_now) <= 0.1 * rss_now  # what the kernel says of the same process a moment later


@pytest.mark.parametrize(
    "body, code, needle",
    [
        ("{not json", 400, "not valid JSON"),
        ("[1, 2]", 400, "JSON object"),
        ('{"prompt": "a", "max_tokens": 1e999}', 400, "number overflow"),  # found by fuzz_request
        ({"max_tokens": 5}, 400, "missing field 'prompt'"),
        ({"prompt": ""}, 400, "non-empty string"),
        ({"prompt": "a", "max_tokens": 0}, 400, "'max_tokens' must be in [1, 1024]"),
        ({"prompt": "a", "max_tokens": 100000}, 400, "'max_tokens' must be in [1, 1024]"),
        ({"prompt": "a", "temperature": -1}, 400, "'temperature'"),
        ({"prompt": "a", "top_p": 0}, 400, "'top_p' must be in (0, 1]"),
        ({"prompt": "a", "top_k": 1.5}, 400, "'top_k' must be an integer"),
        ({"prompt": "a", "seed": -2}, 400, "'seed'"),
        ({"prompt": "a", "stream": "yes"}, 400, "'stream'"),
        ({"prompt": "a", "temprature": 1}, 400, "Unrecognized request argument supplied: temprature"),
        ({"prompt": "caf\u00e9"}, 400, "prompt"),
        (b'{"prompt": "\xff"}', 400, "not valid JSON"),  # the echoed byte is not UTF-8
        # U+0000 is text (tokenized with its length, not cut at it), but not in this char vocabulary.
        ({"prompt": "\u0000"}, 400, "character U+0000 at byte 0 is not in the model's vocabulary"),
        ({"prompt": "ab\u0000cd"}, 400, "character U+0000 at byte 2 is not in the model's vocabulary"),
        ({"prompt": "x" * 33}, 400, "context is 32"),
        ({"prompt": "x" * 70000}, 413, "exceeds 65536 bytes"),
    ],
)
def test_bad_requests_get_4xx_with_a_message(shared_server, body, code, needle):
    server = shared_server
    status, payload = server.request("POST", "/v1/generate", body)
    assert status == code, payload
    error = json.loads(payload)["error"]
    assert needle in error["message"]
    assert server.generate(prompt="a", max_tokens=2)[0] == 200  # the server is unharmed


def test_example_config_file_is_accepted(serve, model_dirs):
    config = ROOT / "deploy" / "server" / "gpt-server.toml"
    server = serve(model_dirs["flash"], "--config", str(config))  # flags win over the file's model and port
    status, body = server.generate(prompt="a", max_tokens=1025)
    assert status == 400 and "[1, 1024]" in body["error"]["message"]  # max-tokens from the file
    assert server.request("POST", "/admin/reload", {})[0] == 404  # admin = false in the file


def test_unknown_paths_and_disabled_admin_are_404(shared_server):
    for method, path in [("GET", "/nope"), ("POST", "/admin/reload")]:  # admin endpoints are off by default
        status, payload = shared_server.request(method, path, {})
        assert status == 404 and "no such endpoint" in json.loads(payload)["error"]["message"]


def test_made_up_paths_share_one_metrics_series(shared_server):
    for i in range(40):
        assert shared_server.request("GET", f"/probe-{i}")[0] == 404
    _, text = shared_server.request("GET", "/metrics")
    endpoints = set(re.findall(r'^gpt_requests_total\{endpoint="([^"]*)"', text, re.MULTILINE))
    assert "other" in endpoints
    assert not any(e.startswith("/probe-") for e in endpoints), endpoints
    assert endpoints <= {"/healthz", "/readyz", "/metrics", "/v1/generate", "/admin/reload", "other"}


def test_full_queue_is_429_and_slot_frees_after(serve, model_dirs):
    server = serve(model_dirs["flash"], "--parallel", "1", "--max-queue", "0", "--max-tokens", "4000")
    conn, _, events = server.stream(prompt="a", max_tokens=4000)
    next(events)  # the slot is taken
    status, payload = server.request("POST", "/v1/generate", {"prompt": "a", "max_tokens": 2})
    assert status == 429 and "queue is full" in json.loads(payload)["error"]["message"]
    conn.close()  # the client hangs up: its generation is cancelled and the slot frees
    deadline = time.monotonic() + 20
    while server.generate(prompt="a", max_tokens=2)[0] != 200:
        assert time.monotonic() < deadline, "slot never freed after the client disconnected"
        time.sleep(0.05)
    assert "finish=cancelled" in server.log_text()


def test_request_timeout_ends_a_generation(serve, model_dirs):
    server = serve(model_dirs["flash"], "--request-timeout", "0.5", "--max-tokens", "100000")
    started = time.monotonic()
    status, body = server.generate(prompt="a", max_tokens=100000)
    elapsed = time.monotonic() - started
    assert status == 200 and body["finish_reason"] == "timeout"
    assert 0 < body["completion_tokens"] < 100000 and len(body["text"]) == body["completion_tokens"]
    assert 0.5 <= elapsed < 5


def corrupt_copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    weights = dst / "cpu" / "weights.safetensors"
    data = bytearray(weights.read_bytes())
    data[-5] ^= 0xFF
    weights.write_bytes(bytes(data))
    return dst


def test_hot_swap_under_load_loses_no_request(serve, model_dirs, tmp_path):
    other = shutil.copytree(model_dirs["other"], tmp_path / "other")  # reloads load from the models root only
    flags, auth = admin_flags(tmp_path, tmp_path)
    server = serve(model_dirs["flash"], *flags, "--parallel", "4", "--max-queue", "32")
    req = dict(prompt="Hello", max_tokens=12, temperature=0)
    before = server.generate(**req)[1]
    results, stop = [], threading.Event()

    def client():
        while not stop.is_set():
            started = time.monotonic()
            status, body = server.generate(**req)
            results.append((started, status, body))

    def after_more_requests(count: int):
        """Until `count` more requests were answered: the load is there however slow the machine is."""
        target, deadline = len(results) + count, time.monotonic() + 60
        while len(results) < target:
            assert time.monotonic() < deadline, f"{len(results)} requests answered, waiting for {target}"
            time.sleep(0.02)

    with ThreadPoolExecutor(8) as pool:
        for _ in range(8):
            pool.submit(client)
        after_more_requests(8)
        status, payload = server.request("POST", "/admin/reload", {"path": str(other)}, headers=auth)
        swapped_at = time.monotonic()
        assert status == 200 and json.loads(payload)["model"] == "tiny-other", payload
        after_more_requests(8)
        bad = corrupt_copy(model_dirs["other"], tmp_path / "corrupt")
        status, payload = server.request("POST", "/admin/reload", {"path": str(bad)}, headers=auth)
        assert status == 422, payload
        assert "GPT_ERR_ARTIFACT_HASH" in payload and "previous model keeps serving" in payload
        after_more_requests(8)
        stop.set()

    after = server.generate(**req)[1]
    assert after["model"] == "tiny-other" and after["tokens"] != before["tokens"]
    assert len(results) > 20
    assert [r for r in results if r[1] != 200] == []  # zero failed requests
    outputs = {"tiny-flash": before["tokens"], "tiny-other": after["tokens"]}
    for started, _, body in results:
        assert body["tokens"] == outputs[body["model"]]  # each request ran wholly on one model
        if started > swapped_at:  # and every request that started after the swap on the new one
            assert body["model"] == "tiny-other"
    _, text = server.request("GET", "/metrics")
    assert 'gpt_model_reloads_total{result="ok"} 2' in text  # start-up + the swap
    assert 'gpt_model_reloads_total{result="failed"} 1' in text


def test_twenty_hot_reloads_leave_no_model_behind(serve, artifacts, tmp_path):
    """Every reload left the replaced model's weights resident (torch's AOTInductor container never released
    its handles on them: runtime/exec/graph.cpp): 24 reloads of a 12.7 MB model took the server from 390 to
    1036 MB, and 20 reloads of this one add 20 times its weights. Now they leave less than one model's weights.

    That bound, not a tenth of one: the server's resident set drifts by 1-2 kB a reload as the allocator's pages
    settle (its live heap is the same after 20 and 60 reloads), over a tenth of this 237 kB model in 20 reloads.
    One malloc arena, so that a reading is what the server holds rather than which arena a new thread drew (each
    load runs on a thread of its own: model_slot.cpp); few HTTP workers, each of which keeps some buffers after
    its first requests, and a warm-up that reaches them all."""
    model = artifacts / "tiny-bpe"  # every linear mm, nothing packed: the weights are all a load allocates
    flags, auth = admin_flags(tmp_path, model)
    server = serve(model, *flags, "--parallel", "1", "--max-queue", "0", env={"MALLOC_ARENA_MAX": "1"})
    _, text = server.request("GET", "/metrics")
    families = text_string_to_metric_families(text)
    weights = next(s.value for f in families for s in f.samples if s.name == "gpt_model_weights_bytes")
    assert weights > 100_000

    def reload_floor(reloads: int) -> int:
        """The lowest resident set after each of `reloads` reloads: the floor a leak raises."""
        lowest = None
        for _ in range(reloads):
            status, payload = server.request("POST", "/admin/reload", {}, headers=auth)
            assert status == 200, payload
            rss = vm_rss_bytes(server.proc.pid)
            lowest = rss if lowest is None else min(lowest, rss)
        return lowest

    for _ in range(40):
        assert server.request("GET", "/metrics")[0] == 200
    reload_floor(10)
    before = reload_floor(5)
    reload_floor(15)
    after = reload_floor(5)  # the two floors' windows are 20 reloads apart
    assert after - before < weights, (before, after, weights)


def test_trusted_keys_serve_signed_artifacts_only(serve, model_dirs, tmp_path):
    secret, public = signing.generate_keypair(tmp_path / "release")
    signed = {}
    for name in ("flash", "other"):
        signed[name] = shutil.copytree(model_dirs[name], tmp_path / f"signed-{name}")
        signing.sign_artifact(signed[name] / "cpu", secret)

    # An unsigned model at start-up: the server refuses to start, naming why.
    refused = subprocess.run(
        [str(SERVER), "--model", str(model_dirs["flash"]), "--port", "0", "--trusted-keys", str(public)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 1
    assert "GPT_ERR_ARTIFACT_SIGNATURE" in refused.stderr and "not signed" in refused.stderr

    # A keys setting that came out empty (an unset shell variable in a unit file) is an error,
    # not "no keys": the server does not start rather than serve unsigned artifacts.
    empty = subprocess.run(
        [str(SERVER), "--model", str(signed["flash"]), "--port", "0", "--trusted-keys", ""],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert empty.returncode == 1
    assert "GPT_ERR_INVALID_ARGUMENT" in empty.stderr and "trusted_keys" in empty.stderr, empty.stderr

    unsigned = shutil.copytree(model_dirs["other"], tmp_path / "unsigned-other")
    flags, auth = admin_flags(tmp_path, tmp_path)
    server = serve(signed["flash"], *flags, "--trusted-keys", str(public))
    status, payload = server.request("POST", "/admin/reload", {"path": str(unsigned)}, headers=auth)
    assert status == 422 and "GPT_ERR_ARTIFACT_SIGNATURE" in payload, payload
    assert server.generate(prompt="a", max_tokens=2)[1]["model"] == "tiny-flash"
    status, payload = server.request("POST", "/admin/reload", {"path": str(signed["other"])}, headers=auth)
    assert status == 200, payload
    assert server.generate(prompt="a", max_tokens=2)[1]["model"] == "tiny-other"


def test_sighup_reloads_the_configured_model(serve, model_dirs, tmp_path):
    link = tmp_path / "current"
    link.symlink_to(model_dirs["flash"])
    server = serve(link)
    assert server.generate(prompt="a", max_tokens=2)[1]["model"] == "tiny-flash"
    link.unlink()
    link.symlink_to(model_dirs["other"])
    server.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 30
    while server.generate(prompt="a", max_tokens=2)[1]["model"] != "tiny-other":
        assert time.monotonic() < deadline, "SIGHUP did not reload"
        time.sleep(0.05)


def test_sigterm_during_a_stream_ends_it_cleanly_and_exits_0(serve, model_dirs):
    grace = 5.0  # long enough that a loaded machine still sees /readyz flip and new requests refused within it
    server = serve(model_dirs["flash"], "--shutdown-grace", str(grace), "--max-tokens", "100000")
    conn, _, events = server.stream(prompt="a", max_tokens=100000, timeout=60)
    for _ in range(3):
        next(events)
    signalled = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace / 2
    while server.request("GET", "/readyz")[0] != 503:  # draining: off the load balancer at once
        assert time.monotonic() < deadline
    status, body = server.generate(prompt="a", max_tokens=2)
    assert status == 503 and "shutting down" in body["error"]["message"]
    rest = list(events)  # the stream goes on through the grace period, then ends with `done`
    conn.close()
    kind, done = rest[-1]
    assert kind == "done" and done["finish_reason"] == "shutdown"
    assert all(k == "token" for k, _ in rest[:-1])
    assert server.proc.wait(timeout=grace + 10) == 0
    assert time.monotonic() - signalled < grace + 10
    log = server.log_text()
    assert "event=shutdown" in log and "event=stopped" in log
    with pytest.raises(OSError):  # nothing listens any more
        socket.create_connection(("127.0.0.1", server.port), timeout=2)


def test_sigterm_lets_a_short_stream_finish(serve, model_dirs):
    server = serve(model_dirs["flash"], "--shutdown-grace", "20")
    conn, _, events = server.stream(prompt="a", max_tokens=300)
    next(events)
    server.proc.send_signal(signal.SIGTERM)
    rest = list(events)
    conn.close()
    assert rest[-1][0] == "done" and rest[-1][1]["finish_reason"] == "length"
    assert rest[-1][1]["completion_tokens"] == 300
    assert server.proc.wait(timeout=20) == 0
