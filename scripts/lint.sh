#!/usr/bin/env bash
# Formatting and lint: the runtime's and gpt_aot's layering, ruff for Python, clang-format and clang-tidy for C/C++.
# Fails on any finding. clang-tidy reads build/compile_commands.json (scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/check_layers.py  # runtime/'s and deploy/server/'s folders include only the layers their tables allow
scripts/check_aot_layers.py  # aot/gpt_aot's subpackages import only the layers below them, and no cycle
# libtorch exports a static copy of std::filesystem::remove_all (pytorch#133437) that crashes with a
# newer libstdc++; which copy a binary calls depends on load order (runtime/formats/files.h, test::remove_tree).
if git grep -n 'filesystem::remove_all(' -- '*.c' '*.cpp' '*.h'; then
  echo "lint: std::filesystem::remove_all above: use gpt::files (runtime) or test::remove_tree (tests)" >&2
  exit 1
fi
.venv/bin/ruff check aot tests bench scripts
.venv/bin/ruff format --check aot tests bench scripts
git ls-files '*.c' '*.cpp' '*.h' | xargs clang-format --dry-run --Werror
# clang-tidy, again only for files that changed since they last passed here (scripts/tidy.py).
scripts/tidy.py $(git ls-files 'runtime/*.cpp' 'kernels/*.cpp' 'cli/*.cpp' 'deploy/server/*.cpp')
