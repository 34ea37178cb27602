#!/usr/bin/env python3
"""The runtime's and gpt-server's layering, checked: each folder of runtime/
includes only the folders below it, and the torch-free ones no torch, ATen or c10
header; each folder of deploy/server/ includes only the folders its table names.

The runtime's table is the one in runtime/CMakeLists.txt and docs/ARCHITECTURE.md.
The torch-free folders are what the fuzzers and sanitizer builds compile, and the
code that reads outside bytes before any hash check: a torch header there would
put libtorch inside that boundary. The server's table (SERVER_LAYERS) is the one
in deploy/server/CMakeLists.txt and docs/ARCHITECTURE.md. Exit status 1 and one
line per finding.

    scripts/check_layers.py                       runtime/ and deploy/server/ of this checkout
    scripts/check_layers.py RUNTIME_DIR           that runtime tree only
    scripts/check_layers.py --server SERVER_DIR   that server tree only
"""

import re
import sys
from pathlib import Path

# folder -> (the folders it may include from, whether it may include torch)
LAYERS = {
    "base": ((), False),
    "formats": (("base",), False),
    "text": (("base", "formats"), False),
    "artifact": (("base", "formats", "text"), True),
    "exec": (("base", "formats", "text", "artifact"), True),
    "train": (("base", "formats", "text", "artifact", "exec"), True),
    "abi": (("base", "formats", "text", "artifact", "exec", "train"), True),
}
TORCH_HEADER = re.compile(r"#\s*include\s*[<\"](torch|ATen|c10|caffe2)/")
RUNTIME_HEADER = re.compile(r"#\s*include\s*\"([A-Za-z0-9_]+)/[^\"]+\"")
SOURCE_SUFFIXES = {".h", ".hpp", ".cpp", ".cc", ".c"}


def findings(runtime: Path) -> list[str]:
    found = []
    for path in sorted(p for p in runtime.rglob("*") if p.suffix in SOURCE_SUFFIXES):
        layer = path.relative_to(runtime).parts[0]
        if layer not in LAYERS:
            found.append(f"{path}: not in a layer folder ({', '.join(LAYERS)})")
            continue
        below, torch_allowed = LAYERS[layer]
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if not torch_allowed and TORCH_HEADER.match(line.strip()):
                found.append(f"{path}:{number}: {layer}/ is torch-free, but includes {line.strip()!r}")
            match = RUNTIME_HEADER.match(line.strip())
            if match and match.group(1) in LAYERS and match.group(1) != layer and match.group(1) not in below:
                allowed = ", ".join(f"{name}/" for name in below) or "no other folder"
                found.append(f"{path}:{number}: {layer}/ may include {allowed}, not {match.group(1)}/")
    return found


# gpt-server: folder -> the folders it may include from ("." is deploy/server/ itself, the top level).
# transport/ is HTTP on Beast and knows no route, model or job; scheduling/ (the served model, its
# scheduler's batched session, admission) uses the top level's clock.h and metrics.h; api/ (the routes and
# their bodies) uses all of them. The top level's shared files (clock.h, metrics, options) include no
# folder; main.cpp, which wires the three together, may include any.
SERVER_LAYERS = {
    ".": (),
    "transport": (),
    "scheduling": (".",),
    "api": (".", "transport", "scheduling"),
}
SERVER_MAIN = "main.cpp"
QUOTED_INCLUDE = re.compile(r"#\s*include\s*\"([^\"]+)\"")


def server_folder(server: Path, path: Path) -> str:
    parts = path.relative_to(server).parts
    return parts[0] if len(parts) > 1 else "."


def included_folder(server: Path, path: Path, header: str) -> str | None:
    """The server folder a quoted include of `path` reads, as the compiler finds it (beside the file first,
    then from deploy/server/); None for a header outside the server (the runtime's, a library's)."""
    for candidate in (path.parent / header, server / header):
        if candidate.is_file():
            resolved = candidate.resolve()
            if resolved.is_relative_to(server.resolve()):
                return server_folder(server.resolve(), resolved)
            return None
    first = header.split("/")[0]
    return first if "/" in header and first in SERVER_LAYERS else None  # a folder's header that is not there


def server_findings(server: Path) -> list[str]:
    def name(folder: str) -> str:
        return "the top level" if folder == "." else f"{folder}/"

    found = []
    for path in sorted(p for p in server.rglob("*") if p.suffix in SOURCE_SUFFIXES):
        layer = server_folder(server, path)
        if layer not in SERVER_LAYERS:
            folders = ", ".join(f"{folder}/" for folder in SERVER_LAYERS if folder != ".")
            found.append(f"{path}: not in a layer folder (the top level, {folders})")
            continue
        allowed = tuple(SERVER_LAYERS) if layer == "." and path.name == SERVER_MAIN else SERVER_LAYERS[layer]
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            match = QUOTED_INCLUDE.match(line.strip())
            if not match:
                continue
            target = included_folder(server, path, match.group(1))
            if target is not None and target != layer and target not in allowed:
                names = ", ".join(name(folder) for folder in allowed) or "no other folder"
                found.append(f"{path}:{number}: {name(layer)} may include {names}, not {name(target)}")
    return found


def main() -> int:
    root = Path(__file__).resolve().parent.parent
    if len(sys.argv) > 2 and sys.argv[1] == "--server":
        found = server_findings(Path(sys.argv[2]))
    elif len(sys.argv) > 1:
        found = findings(Path(sys.argv[1]))
    else:
        found = findings(root / "runtime") + server_findings(root / "deploy" / "server")
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
