#!/usr/bin/env bash
# Builds everything the GPU checks run, here on a CPU machine (nvcc compiles and links without a GPU), and
# packs it for a GPU machine that receives only the repository and a bare CUDA image (CMake, ninja, the
# CUDA runtime and cuBLAS; no Qt, possibly another glibc): the executables in their build-tree layout (so
# that ../lib/kvscope/libkvscope-cuda.so is found as in the build), every library they load that is not
# part of CUDA, including glibc and its loader (tests/gpu/run_device_checks.sh starts them through it),
# and nothing else: the test models are tests/data, which is in the repository.
# The bundle is one xz-compressed tarball (ICU's data alone is 31 MB unpacked) at
# device-bundle/kvscope-device.tar.xz, ignored by git; carry the folder "device-bundle".
#   tests/gpu/prepare_device_checks.sh [BUILD_DIR]    env: CUDA_ARCH (90: the H200), JOBS (2)
# BUILD_DIR (default build-device) is configured when it does not exist yet; an existing CUDA build whose
# KVSCOPE_CUDA_ARCHITECTURES include CUDA_ARCH will do (build/ builds 80;89;90).
set -euo pipefail

SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="$(realpath -m "${1:-$SRC/build-device}")"
CUDA_ARCH="${CUDA_ARCH:-90}"
JOBS="${JOBS:-2}"
OUT="$SRC/device-bundle"
# What run_device_checks.sh runs; paths relative to the build folder.
EXECUTABLES=(tests/test_backend_ops tests/test_cuda_backend_ops tests/test_cuda_e2e app/kvscope-cuda-bench app/kvscope-cli)
LIBRARIES=(lib/kvscope/libkvscope-cuda.so)
# Provided by the CUDA image (toolkit) or the host (driver): never carried, they are large and must match.
CUDA_LIBS='^(libcuda|libcudart|libcublas|libcublasLt|libnvidia-|libnvrtc|libcufft|libcurand)'

if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
    GEN=()
    command -v ninja >/dev/null && GEN=(-G Ninja)
    cmake -S "$SRC" -B "$BUILD" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DKVSCOPE_BUILD_GUI=OFF -DKVSCOPE_CUDA=ON \
          -DKVSCOPE_CUDA_ARCHITECTURES="$CUDA_ARCH"
fi
archs="$(sed -n 's/^KVSCOPE_CUDA_ARCHITECTURES:[A-Z]*=//p' "$BUILD/CMakeCache.txt")"
[[ ";$archs;" == *";$CUDA_ARCH;"* ]] || {
    echo "prepare_device_checks: $BUILD builds CUDA architectures '$archs', not $CUDA_ARCH" >&2
    exit 2
}
targets=()
for e in "${EXECUTABLES[@]}"; do targets+=("$(basename "$e")"); done
cmake --build "$BUILD" -j "$JOBS" --target "${targets[@]}" kvscope_cuda_library

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/sys"
for f in "${EXECUTABLES[@]}" "${LIBRARIES[@]}"; do
    [[ -f "$BUILD/$f" ]] || { echo "prepare_device_checks: $BUILD/$f was not built" >&2; exit 1; }
    mkdir -p "$stage/$(dirname "$f")"
    cp "$BUILD/$f" "$stage/$f"
    strip --strip-debug "$stage/$f"
done
# Every library the loader resolves for them, minus CUDA's; ldd also lists the loader itself.
for f in "${EXECUTABLES[@]}" "${LIBRARIES[@]}"; do ldd "$BUILD/$f"; done |
    awk '/=> \// {print $3} $1 ~ /^\/.*ld-linux/ {print $1}' | sort -u |
    while read -r lib; do
        name="$(basename "$lib")"
        [[ "$name" =~ $CUDA_LIBS ]] && continue
        cp -L "$lib" "$stage/sys/$name"
    done
[[ -f "$stage/sys/ld-linux-x86-64.so.2" ]] || { echo "prepare_device_checks: no dynamic loader found by ldd" >&2; exit 1; }
{
    echo "commit $(git -C "$SRC" rev-parse HEAD 2>/dev/null || echo unknown)"
    echo "cuda_arch $CUDA_ARCH"
    echo "built $(date -u +%FT%TZ)"
} >"$stage/BUNDLE"

mkdir -p "$OUT"
XZ_OPT="-T0" tar -C "$stage" -cJf "$OUT/kvscope-device.tar.xz.part" .
mv "$OUT/kvscope-device.tar.xz.part" "$OUT/kvscope-device.tar.xz"
echo "prepare_device_checks: $OUT/kvscope-device.tar.xz, $(du -h "$OUT/kvscope-device.tar.xz" | cut -f1)" \
     "($(du -sh "$stage" | cut -f1) unpacked); carry device-bundle"
