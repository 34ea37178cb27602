#!/usr/bin/env python3
"""The runtime's layering, checked: each folder of runtime/ includes only the
folders below it, and the torch-free ones no torch, ATen or c10 header.

The table is the one in runtime/CMakeLists.txt and docs/ARCHITECTURE.md. The
torch-free folders are what the fuzzers and sanitizer builds compile, and the
code that reads outside bytes before any hash check: a torch header there would
put libtorch inside that boundary. Exit status 1 and one line per finding.

    scripts/check_layers.py [RUNTIME_DIR]   (default: runtime/ of this checkout)
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


def main() -> int:
    runtime = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "runtime"
    found = findings(runtime)
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
