#!/usr/bin/env bash
# Formatting and lint: the runtime's layering, ruff for Python, clang-format and clang-tidy for C/C++.
# Fails on any finding. clang-tidy reads build/compile_commands.json (scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/check_layers.py  # runtime/'s folders include only the layers below them
.venv/bin/ruff check aot tests bench scripts
.venv/bin/ruff format --check aot tests bench scripts
git ls-files '*.c' '*.cpp' '*.h' | xargs clang-format --dry-run --Werror
git ls-files 'runtime/*.cpp' 'cli/*.cpp' 'deploy/server/*.cpp' | xargs -P "$(nproc)" -n 1 clang-tidy -p build --quiet 2>&1 |
  { grep -v "warnings generated" || true; }
