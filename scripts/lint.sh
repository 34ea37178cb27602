#!/usr/bin/env bash
# Formatting and lint: ruff for Python, clang-format for C/C++. Fails on any finding.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/ruff check aot tests
.venv/bin/ruff format --check aot tests
git ls-files '*.c' '*.cpp' '*.h' | xargs clang-format --dry-run --Werror
