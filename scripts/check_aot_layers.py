#!/usr/bin/env python3
"""gpt_aot's layering, checked: each subpackage of aot/gpt_aot imports only the
subpackages below it, and no chain of imports leads back to where it started.

The table is the one in docs/ARCHITECTURE.md, bottom to top; model and text are
siblings, as are importers and compiler, and siblings import neither way. The
package's own __init__.py and the CLI (__main__.py) sit above every layer. An
import inside a function counts as much as one at the top: it runs, it is a
dependency, and it is how a cycle hides. Exit status 1 and one line per finding.

    scripts/check_aot_layers.py [PACKAGE_DIR]   (default: aot/gpt_aot of this checkout)
"""

import ast
import sys
from collections import deque
from pathlib import Path

PACKAGE = "gpt_aot"
# subpackage -> the subpackages it may import from
LAYERS = {
    "base": (),
    "model": ("base",),
    "text": ("base",),
    "artifact": ("base", "model", "text"),
    "importers": ("base", "model", "text", "artifact"),
    "compiler": ("base", "model", "text", "artifact"),
}
TOP = ("__init__.py", "__main__.py")  # the package itself and its CLI: above every layer, may import any


def module_name(package: Path, path: Path) -> str:
    parts = path.relative_to(package).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((PACKAGE, *parts))


def imported(node: ast.AST, importer: str, is_package: bool, modules: set[str]) -> list[str]:
    """The gpt_aot modules one import statement names: `from a import b` names a.b where that is a module."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names if alias.name.split(".")[0] == PACKAGE]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:  # relative: from the importer's own package, one level up per extra dot
        here = importer.split(".") if is_package else importer.split(".")[:-1]
        base = ".".join(here[: len(here) - node.level + 1] + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    if base.split(".")[0] != PACKAGE:
        return []
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]


def layer_of(module: str) -> str | None:
    """The subpackage a module lies in; None for the package itself and its top-level modules."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in LAYERS) else None


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """One cycle per group of modules that import each other (Tarjan's strongly connected components),
    as the shortest path from the group's first module back to itself."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    found = []
    for group in groups:
        start = min(group)
        parent, queue = {}, deque([start])
        while start not in parent:  # breadth first, inside the group: every member leads back to start
            node = queue.popleft()
            for nxt in sorted(graph[node]):
                if nxt in group and nxt not in parent:
                    parent[nxt] = node
                    queue.append(nxt)
        path, node = [start], parent[start]
        while node != start:
            path.append(node)
            node = parent[node]
        found.append([start, *reversed(path)])
    return found


def findings(package: Path) -> list[str]:
    found = []
    paths = sorted(package.rglob("*.py"))
    modules = {module_name(package, p) for p in paths}
    graph: dict[str, dict[str, int]] = {}  # module -> the modules it imports -> the line of the first import
    files = {}
    for path in paths:
        rel = path.relative_to(package)
        importer = module_name(package, path)
        layer = rel.parts[0] if len(rel.parts) > 1 else None  # None: the top, __init__.py or __main__.py
        outside = layer not in LAYERS if layer else rel.name not in TOP
        if outside:
            found.append(f"{path}: not in a layer folder ({', '.join(LAYERS)})")
            continue
        graph[importer], files[importer] = {}, path
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for target in imported(node, importer, path.name == "__init__.py", modules):
                graph[importer].setdefault(target, node.lineno)
                if layer is None:
                    continue
                to = layer_of(target)
                if to is None:
                    found.append(f"{path}:{node.lineno}: {layer}/ imports {target}, above every layer")
                elif to != layer and to not in LAYERS[layer]:
                    allowed = ", ".join(f"{name}/" for name in LAYERS[layer]) or "no other folder"
                    found.append(f"{path}:{node.lineno}: {layer}/ may import {allowed}, not {to}/ ({target})")
    for cycle in cycles(graph):  # each module with the line that imports the next
        hops = [f"{a} (line {graph[a][b]})" for a, b in zip(cycle, cycle[1:], strict=False)]
        found.append(f"{files[cycle[0]]}:{graph[cycle[0]][cycle[1]]}: import cycle: {' -> '.join(hops)} -> {cycle[0]}")
    return found


def main() -> int:
    package = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "aot" / PACKAGE
    found = findings(package)
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
