#!/usr/bin/env bash
# Installs what dlock needs to build and test on a fresh Debian (bookworm)
# machine. Idempotent: packages already present are not fetched again.
#   scripts/setup.sh            everything (C/C++, Python, Go, Java)
set -euo pipefail

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  mariadb-server mariadb-client libmariadb-dev
  doctest-dev libcli11-dev nlohmann-json3-dev
  faketime python3 python3-venv python3-dev
  swig clang-14 libclang-rt-14-dev openssl
  abigail-tools
  galera-4 rsync
  maven openjdk-17-jdk-headless
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "setup: system packages ready"
