#!/usr/bin/env bash
# Installs, with apt-get, whichever of the Debian packages zaris needs to build,
# test and benchmark are missing. Runs `apt-get update` only if something is.
# Works as root (or through sudo) on Debian 12.
set -euo pipefail

packages=(cmake g++ make libboost-dev libboost-test-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev libfmt-dev
  libcpp-httplib-dev tmux clang libclang-rt-14-dev dpkg-dev pkg-config doxygen python3 python3-pytest
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler etcd-server etcd-client)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg -s "$package" >/dev/null 2>&1; then
    missing+=("$package")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo)
else
  echo "deps.sh: missing packages: ${missing[*]}; run as root to install them" >&2
  exit 1
fi

echo "deps.sh: installing ${missing[*]}"
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -q --no-install-recommends "${missing[@]}"
