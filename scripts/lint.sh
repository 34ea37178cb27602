#!/usr/bin/env bash
# Formatting and lint: the runtime's layering, ruff for Python, clang-format and clang-tidy for C/C++.
# Fails on any finding. clang-tidy reads build/compile_commands.json (scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/check_layers.py  # runtime/'s folders include only the layers below them
# libtorch exports a static copy of std::filesystem::remove_all (pytorch#133437) that crashes with a
# newer libstdc++; which copy a binary calls depends on load order (runtime/formats/files.h, test::remove_tree).
if git grep -n 'filesystem::remove_all(' -- '*.c' '*.cpp' '*.h'; then
  echo "lint: std::filesystem::remove_all above: use gpt::files (runtime) or test::remove_tree (tests)" >&2
  exit 1
fi
.venv/bin/ruff check aot tests bench scripts
.venv/bin/ruff format --check aot tests bench scripts
git ls-files '*.c' '*.cpp' '*.h' | xargs clang-format --dry-run --Werror
# clang-tidy parses torch's headers for most files (tens of seconds each): a file is checked again only when
# it, a project header, the checks, the tool or its compile command changed since it last passed on this
# machine (stamps under GPT_CACHE_DIR); GPT_FULL=1 (scripts/test.sh --full) checks every file.
tidy_cache=${GPT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpt-aot}/clang-tidy
mkdir -p "$tidy_cache"
shared=$( { clang-tidy --version; cat .clang-tidy; git ls-files -z '*.h' | xargs -0 cat; } | sha256sum | cut -c1-64)
export shared tidy_cache
tidy_one() {
  local file=$1 key
  key=$( { echo "$shared"; cat "$file"; .venv/bin/python -c 'import json, sys
import os
commands = json.load(open("build/compile_commands.json"))
print([str(c.get("command", c.get("arguments"))).replace(os.getcwd(), "@") for c in commands
       if c["file"].endswith("/" + sys.argv[1])])' "$file"; } | sha256sum | cut -c1-64)
  if [ -z "${GPT_FULL:-}" ] && [ -e "$tidy_cache/$key" ]; then return 0; fi
  clang-tidy -p build --quiet "$file" 2>&1 | { grep -v "warnings generated" || true; }
  [ "${PIPESTATUS[0]}" -eq 0 ] && touch "$tidy_cache/$key"
}
export -f tidy_one
git ls-files 'runtime/*.cpp' 'cli/*.cpp' 'deploy/server/*.cpp' | xargs -P "$(nproc)" -I{} bash -c 'tidy_one "$1"' _ {}
