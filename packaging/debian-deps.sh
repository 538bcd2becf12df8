#!/usr/bin/env bash
# Installs, with apt, the Debian 12 packages that kvscope needs to build and test, and only those that
# are missing (so a machine that has them all needs no network). Run as root.
set -euo pipefail
# ccache: the CI's second builds (headless, portable CUDA) reuse the first's objects (CMakeLists.txt).
# tests/packaging: qemu-user runs a portable kvscope-cli on emulated CPUs without AVX-512 or AVX;
# dpkg-dev has dpkg-shlibdeps (cpack -G DEB's Depends); desktop-file-utils and appstream validate the
# desktop file and the metainfo.
packages=(cmake ninja-build ccache g++ pkg-config git qt6-base-dev qt6-base-dev-tools libqcustomplot-dev
          nlohmann-json3-dev libcli11-dev libcpp-httplib-dev libcurl4-openssl-dev libssl-dev libpcre2-dev libutf8proc-dev libgl-dev qemu-user
          dpkg-dev desktop-file-utils appstream)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
