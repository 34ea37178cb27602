#!/usr/bin/env bash
# The install as a deployment gets it. Installs the library (the `runtime` component)
# into a scratch prefix; checks what it exports and that nothing in it points into
# the build's virtualenv or build tree. Under GPT_FULL=1 (scripts/test.sh --full) the
# library is first built alone (no CLI, server or tests) in a fresh tree, and that
# is what gets installed; otherwise BUILD_DIR's library is (the same sources and
# flags: a fresh tree's objects would be compiled again). Then, with that
# virtualenv out of reach (a private mount namespace puts an empty directory
# over it), builds and runs tests/install/consumer against the install with
# find_package and pkg-config, and (under GPT_FULL=1) builds deploy/server
# against it, giving LibTorch only the documented way: LD_LIBRARY_PATH to a copy
# of the torch wheel.
# Usage: check_install.sh BUILD_DIR ARTIFACT PYTHON
set -euo pipefail
build=$1 artifact=$2 python=$3
src=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$src/../.." && pwd)
work=$(mktemp -d "$build/install-check.XXXXXX")  # beside the virtualenv's file system: hard links work
libonly=$(mktemp -d "$build-libonly.XXXXXX")
trap 'rm -rf "$work" "$libonly"' EXIT
prefix=$work/prefix

if [ -n "${GPT_FULL:-}" ]; then
  log=$work/libonly.log  # shown only on failure: torch's CMake package warns about things that do not apply
  cmake -S "$root" -B "$libonly" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPT_BUILD_TESTS=OFF \
    -DPython3_EXECUTABLE="$python" >"$log" 2>&1 || { cat "$log"; exit 1; }
  cmake --build "$libonly" --target gpt_runtime >>"$log" 2>&1 || { cat "$log"; exit 1; }
  cmake --install "$libonly" --prefix "$prefix" >/dev/null
  programs=$(ls -A "$prefix/bin" 2>/dev/null || true)
  [ -z "$programs" ] || { echo "a library-only build installed programs: $programs"; exit 1; }
else
  cmake --install "$build" --component runtime --prefix "$prefix" >/dev/null
fi

abi=$(sed -n 's/^#define GPT_RUNTIME_ABI_VERSION \([0-9]*\)$/\1/p' "$root/include/gpt_runtime.h")
lib=$(ls "$prefix"/lib*/libgpt_runtime.so."$abi")
# The C API, no more; the C functions that the artifacts' graphs bind to (kernels/c_shims.h) are libgpt_kernel_shims's,
# beside it, which exports those and the hook that installs their definitions, and depends on nothing (made global
# by the runtime, it must bring nothing of libtorch's into the global scope).
leaked=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^gpt_' || true)
[ -z "$leaked" ] || { echo "exported beyond the C API: $leaked"; exit 1; }
kernels=$(sed -n 's/^#define GPT_KERNELS_VERSION \([0-9]*\)$/\1/p' "$root/kernels/kernels.h")
shim_lib=$(ls "$(dirname "$lib")/libgpt_kernel_shims.so.$kernels")
shims=$(sed -n 's/^GPT_KERNELS_SHIM [A-Za-z]* \**\([a-z0-9_]*\)(.*/\1/p' "$root/kernels/c_shims.h" | sort)
[ "$(wc -l <<<"$shims")" -gt 1 ] || { echo "no C shim declared in kernels/c_shims.h"; exit 1; }
shim_exports=$(nm -D --defined-only "$shim_lib" | awk '{print $3}' | sort)
[ "$shim_exports" = "$shims" ] || { echo "libgpt_kernel_shims exports $shim_exports, not $shims"; exit 1; }
shim_needs=$(readelf -d "$shim_lib" | grep NEEDED | grep -v 'libc\.so' || true)
[ -z "$shim_needs" ] || { echo "libgpt_kernel_shims depends on more than libc: $shim_needs"; exit 1; }
# grep -q reads the output whole from a variable: fed by a pipe it may quit early,
# and the writer's SIGPIPE fails the pipeline under pipefail.
dynamic=$(readelf -d "$lib")
grep -q "SONAME.*libgpt_runtime.so.$abi\]" <<<"$dynamic" || { echo "SONAME is not libgpt_runtime.so.$abi"; exit 1; }
venv=$("$python" -c 'import sys; print(sys.prefix)')
installed=$(cat "$prefix"/lib*/pkgconfig/gpt_runtime.pc "$prefix"/lib*/cmake/gpt_runtime/*.cmake; echo "$dynamic")
if grep -q -e "$venv" -e "$(realpath "$venv")" -e "$libonly" -e "$(realpath "$build")" <<<"$installed"; then
  echo "the install points into the build's virtualenv or build tree:"
  grep -e "$venv" -e "$(realpath "$venv")" -e "$libonly" -e "$(realpath "$build")" <<<"$installed"
  exit 1
fi

# LibTorch as a deployment provides it: the wheel's files in a place of their own
# (hard links: a copy that costs no space), found through LD_LIBRARY_PATH.
site=$("$python" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')
cp -al "$site" "$work/site-packages"
libtorch=$work/site-packages/torch/lib

consume() {
  export LD_LIBRARY_PATH=$libtorch
  [ ! -e "$venv/bin/python" ] || [ "${GPT_INSTALL_CHECK_VENV_VISIBLE:-}" ] || { echo "the virtualenv is still visible"; exit 1; }
  cmake -S "$src/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
  cmake --build "$work/consumer" >/dev/null
  "$work/consumer/consumer" "$artifact"

  export PKG_CONFIG_PATH="$(dirname "$lib")/pkgconfig"
  cc "$src/consumer/main.c" $(pkg-config --cflags --libs gpt_runtime) -Wl,-rpath,"$(dirname "$lib")" \
    -o "$work/pc_consumer"
  "$work/pc_consumer" "$artifact"

  # The example server is an outside consumer too: it builds against the install alone (in the full run:
  # its 27 sources compiled again, a minute of the 2-core per-submission run for what the consumers above show).
  if [ -n "${GPT_FULL:-}" ]; then
    # Its sources alone, away from the tree: nothing of the runtime's sources can be reached from there.
    cp -r "$root/deploy/server" "$work/server-src"
    cmake -S "$work/server-src" -B "$work/server" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
    cmake --build "$work/server" >/dev/null
    usage=$("$work/server/gpt-server" --help)
    grep -q -- "--model" <<<"$usage" || { echo "installed-library gpt-server does not run"; exit 1; }
    linked=$(ldd "$work/server/gpt-server")
    grep -q "$prefix/lib.*libgpt_runtime.so.$abi" <<<"$linked" || { echo "gpt-server did not link the install"; exit 1; }
  fi
  grep -q "$libtorch/libtorch" <<<"$(ldd "$lib")" || { echo "libtorch did not come from LD_LIBRARY_PATH"; exit 1; }
  echo "install OK: $(pkg-config --modversion gpt_runtime), exports only gpt_* ($(nm -D --defined-only "$lib" |
    grep -c ' gpt_') symbols), LibTorch from LD_LIBRARY_PATH"
}

if unshare --mount --propagation private true 2>/dev/null; then
  export -f consume
  export src root work prefix lib abi venv libtorch artifact
  unshare --mount --propagation private bash -euo pipefail -c \
    'mount -t tmpfs -o size=1m gpt-hidden "$(realpath "$venv")" && consume'
else
  echo "install check: no private mount namespace here (needs root), so the virtualenv stays visible;" \
    "the install's RUNPATH and files were checked for it above"
  GPT_INSTALL_CHECK_VENV_VISIBLE=1 consume
fi
