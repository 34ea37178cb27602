#!/usr/bin/env bash
# Installs the build into a scratch prefix, checks what the library exports,
# then configures, builds and runs tests/install/consumer against the install
# with both find_package and pkg-config, and builds deploy/server against it.
# Usage: check_install.sh BUILD_DIR ARTIFACT
set -euo pipefail
build=$1 artifact=$2
src=$(cd "$(dirname "$0")" && pwd)
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT

cmake --install "$build" --prefix "$prefix" >/dev/null
abi=$(sed -n 's/^#define GPT_RUNTIME_ABI_VERSION \([0-9]*\)$/\1/p' "$src/../../include/gpt_runtime.h")
lib=$(ls "$prefix"/lib*/libgpt_runtime.so."$abi")
leaked=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^gpt_' || true)
[ -z "$leaked" ] || { echo "exported beyond the C API: $leaked"; exit 1; }
# grep -q reads the output whole from a variable: fed by a pipe it may quit early,
# and the writer's SIGPIPE fails the pipeline under pipefail.
dynamic=$(readelf -d "$lib")
grep -q "SONAME.*libgpt_runtime.so.$abi\]" <<<"$dynamic" || { echo "SONAME is not libgpt_runtime.so.$abi"; exit 1; }

cmake -S "$src/consumer" -B "$prefix/consumer" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$prefix/consumer" >/dev/null
"$prefix/consumer/consumer" "$artifact"

# The example server is an outside consumer too: it builds against the install alone.
cmake -S "$src/../../deploy/server" -B "$prefix/server" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$prefix/server" >/dev/null
usage=$("$prefix/server/gpt-server" --help)
grep -q -- "--model" <<<"$usage" || { echo "installed-library gpt-server does not run"; exit 1; }
linked=$(ldd "$prefix/server/gpt-server")
grep -q "$prefix/lib.*libgpt_runtime.so.$abi" <<<"$linked" || { echo "gpt-server did not link the install"; exit 1; }

export PKG_CONFIG_PATH="$(dirname "$lib")/pkgconfig"
cc "$src/consumer/main.c" $(pkg-config --cflags --libs gpt_runtime) -Wl,-rpath,"$(dirname "$lib")" -o "$prefix/pc_consumer"
"$prefix/pc_consumer" "$artifact"
echo "install OK: $(pkg-config --modversion gpt_runtime), exports only gpt_* ($(nm -D --defined-only "$lib" | grep -c ' gpt_') symbols)"
