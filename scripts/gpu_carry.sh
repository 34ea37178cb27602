#!/usr/bin/env bash
# On a CPU machine with apt: gather what scripts/gpu_check.sh needs on a GPU
# machine that reaches no package registry. The Debian packages the build uses
# are downloaded (not installed) and unpacked with `dpkg -x` into .carry/root,
# an ignored folder that travels with the working tree. torch, nvcc, cmake,
# ninja, g++ and the Python packages are the GPU machine's own.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  catch2 libspdlog-dev libspdlog1.10 libfmt-dev libfmt9 nlohmann-json3-dev libcli11-dev
  libsodium-dev libsodium23
  libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3  # the BPE split pattern (runtime/text)
  libboost1.81-dev                                                  # Boost.Beast and Asio headers (gpt-server's transport)
  libgloo-dev                                                       # headers for c10d's ProcessGroupGloo
  pkgconf pkgconf-bin libpkgconf3                                   # CMake's FindPkgConfig
  bible-kjv bible-kjv-text                                          # the test corpus
)
# Libraries the above link against that a GPU machine normally has: unpacked
# apart, and used there only where its own copy is missing (scripts/gpu_check.sh).
FALLBACK=(libssl3 zlib1g libreadline8)

CARRY=.carry
rm -rf "$CARRY"
mkdir -p "$CARRY/debs/root" "$CARRY/debs/fallback"
chmod -R 777 "$CARRY/debs"  # apt fetches as its own user
(cd "$CARRY/debs/root" && apt-get download -qq "${PACKAGES[@]}")
(cd "$CARRY/debs/fallback" && apt-get download -qq "${FALLBACK[@]}")
for part in root fallback; do
  for deb in "$CARRY/debs/$part"/*.deb; do dpkg -x "$deb" "$CARRY/$part"; done
done
rm -rf "$CARRY/debs" "$CARRY"/*/usr/share/doc "$CARRY"/*/usr/share/man
# Python packages the tests use that the GPU image lacks (the official openai client, for
# tests/deploy), as wheels for its python3.12 with what they need; gpu_check.sh installs them
# beside the image's own packages only where `import openai` fails there.
python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$CARRY/wheels" "$(grep -o '^openai[^ ]*' requirements.txt)"
# pkg-config files say prefix=/usr: make them relative to where they lie, so the
# folder works wherever it is copied (a sysroot would also move the install's own .pc).
sed -i -E 's#^([A-Za-z_]+)=/usr(/|$)#\1=${pcfiledir}/../../..\2#' "$CARRY"/root/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc
sed -i -E 's#^([A-Za-z_]+)=/usr(/|$)#\1=${pcfiledir}/../..\2#' "$CARRY"/root/usr/share/pkgconfig/*.pc

echo "gpu_carry: $(du -sh "$CARRY" | cut -f1) in $CARRY; run scripts/gpu_check.sh on the GPU machine with $CARRY carried"
