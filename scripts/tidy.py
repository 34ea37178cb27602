#!/usr/bin/env python3
"""clang-tidy over the given sources, skipping those that passed before unchanged.

Most sources parse torch's headers (tens of seconds each, 13 min for the tree on 2 cores),
so a file is checked again only when it, one of the project headers it includes (the build's
own dependency record: `ninja -t deps`), the checks, the tool or its compile command changed
since it last passed. A verdict is the digest of all of those, with this repository's path
written as "@" so that it holds in any clone. Verdicts are kept in VERDICTS, a tracked file
that every run rewrites with the verdicts of the files that pass, so a fresh clone (CI's)
checks only what changed since the run that produced the committed file, and a branch
carries its own. GPT_FULL=1 ignores it and checks every file.
Usage: scripts/tidy.py FILE...   (run from the repository root after scripts/build.sh, with
every source to check: the files not named lose their verdicts)
"""

import hashlib
import json
import os
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "build"
VERDICTS = ROOT / ".clang-tidy-verdicts"  # "<digest> <source>" per line, sorted by source


def recorded_verdicts() -> set[str]:
    if not VERDICTS.exists():
        return set()
    return {line.split()[0] for line in VERDICTS.read_text().splitlines() if line.strip()}


def project_headers(obj: str) -> list[Path]:
    """The headers of this repository (not its virtualenv) that the object's last compile read."""
    deps = subprocess.run(["ninja", "-C", str(BUILD), "-t", "deps", obj], capture_output=True, text=True).stdout
    paths = [(BUILD / line.strip()).resolve() for line in deps.splitlines()[1:] if line.strip()]
    venv = ROOT / ".venv"
    return sorted(p for p in paths if p.is_relative_to(ROOT) and not p.is_relative_to(venv) and p.suffix == ".h")


def verdict_key(source: str, command: str, shared: bytes) -> str | None:
    """None when the build has no dependency record for it (then it is always checked)."""
    words = shlex.split(command)
    obj = words[words.index("-o") + 1]
    headers = project_headers(obj)
    if not headers:
        return None
    digest = hashlib.sha256(shared)
    digest.update(command.replace(str(ROOT), "@").encode())
    for path in [ROOT / source, *headers]:
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def main(files: list[str]) -> int:
    commands = {
        str(Path(c["file"]).resolve().relative_to(ROOT)): c["command"]
        for c in json.loads((BUILD / "compile_commands.json").read_text())
        if Path(c["file"]).resolve().is_relative_to(ROOT)
    }
    version = subprocess.run(["clang-tidy", "--version"], capture_output=True, text=True, check=True).stdout
    shared = version.encode() + (ROOT / ".clang-tidy").read_bytes()
    recorded = set() if os.environ.get("GPT_FULL") else recorded_verdicts()
    passed: dict[str, str] = {}  # source -> its verdict, for VERDICTS
    skipped: list[str] = []

    def check(source: str) -> bool:
        key = verdict_key(source, commands[source], shared) if source in commands else None
        if key and key in recorded:
            passed[source] = key
            skipped.append(source)
            return True
        run = subprocess.run(["clang-tidy", "-p", str(BUILD), "--quiet", source], capture_output=True, text=True)
        report = "\n".join(line for line in (run.stdout + run.stderr).splitlines() if "warnings generated" not in line)
        if report.strip():
            print(report, flush=True)
        if run.returncode == 0 and key:
            passed[source] = key
        return run.returncode == 0

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        results = list(pool.map(check, files))
    verdicts = "".join(f"{passed[source]} {source}\n" for source in sorted(passed))
    if not VERDICTS.exists() or VERDICTS.read_text() != verdicts:
        VERDICTS.write_text(verdicts)
    print(f"clang-tidy: {len(files) - len(skipped)} of {len(files)} sources checked (the rest passed unchanged)")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
