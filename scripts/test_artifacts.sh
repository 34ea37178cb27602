#!/usr/bin/env bash
# The test artifacts (tests/fixtures/build_artifacts.py) into OUT_DIR, compiled once per content: what they
# are made from (aot/, tests/fixtures/, kernels/, torch, the C++ compiler, the CPU's flags, Python) keys a copy kept
# under GPT_CACHE_DIR, which a later run on this machine copies instead of compiling. GPT_FULL=1 compiles.
# Usage: scripts/test_artifacts.sh OUT_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
out=$1
cache=${GPT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpt-aot}/test-artifacts
key=$( {
  git ls-files -z aot tests/fixtures kernels | xargs -0 sha256sum
  .venv/bin/python -c 'import sys, torch; from gpt_aot.compiler import isa; print(sys.version, torch.__version__, sorted(isa.cpu_flags()))'
  "$(.venv/bin/python -c 'from torch._inductor import cpp_builder; print(cpp_builder.get_cpp_compiler())')" --version
} | sha256sum | cut -c1-16)

rm -rf "$out"
if [ -z "${GPT_FULL:-}" ] && [ -e "$cache/$key/complete" ]; then
  cp -a "$cache/$key/artifacts" "$out"
  echo "test artifacts: copied from $cache/$key (their sources are unchanged; GPT_FULL=1 compiles them)"
  exit 0
fi
.venv/bin/python tests/fixtures/build_artifacts.py "$out"
# Kept whole or not at all; only the newest two keys stay.
mkdir -p "$cache"
tmp=$(mktemp -d "$cache/.new.XXXXXX")
cp -a "$out" "$tmp/artifacts" && touch "$tmp/complete"
rm -rf "${cache:?}/$key" && mv "$tmp" "$cache/$key"
ls -1t "$cache" | grep -v '^\.' | tail -n +3 | while read -r old; do rm -rf "${cache:?}/$old"; done
