#!/usr/bin/env bash
# Formatting and lint: ruff for Python, clang-format and clang-tidy for C/C++.
# Fails on any finding. clang-tidy reads build/compile_commands.json (scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/ruff check aot tests bench scripts
.venv/bin/ruff format --check aot tests bench scripts
git ls-files '*.c' '*.cpp' '*.h' | xargs clang-format --dry-run --Werror
git ls-files 'runtime/*.cpp' 'cli/*.cpp' 'deploy/server/*.cpp' | xargs -P "$(nproc)" -n 1 clang-tidy -p build --quiet 2>&1 |
  { grep -v "warnings generated" || true; }
