#!/usr/bin/env bash
# Installs the Debian packages weft's build, tests and benchmarks need, when missing.
# Usage: scripts/deps.sh [core|test|bench|all]   (default: all)
#   core  : compilers and build tools for the library
#   test  : + python3 (the tp-reuse check, the report's tests), gdb (a hung test's backtraces), clang-19 sanitizer
#           runtimes, LLVM 19 headers and FileCheck (the yield plugin and its tests), aarch64 cross compiler, qemu-user
#   bench : + Boost.Fiber/Context, Python matplotlib, Go, Rust (cargo), nginx, wrk, sysbench, valgrind
#           (bench/switch_counts.py)
#   conformance : dpkg-dev (apt-get source unpacks the Open POSIX Test Suite with it)
# Safe to run repeatedly: it only calls apt-get when a package is absent.
set -euo pipefail

want=${1:-all}
core=(build-essential cmake ninja-build pkg-config liburing-dev)
test=(python3 gdb clang-19 libclang-rt-19-dev llvm-19 llvm-19-dev llvm-19-tools gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user)
bench=(clang-19 llvm-19-dev libboost-fiber-dev libboost-context-dev python3-matplotlib golang-go cargo nginx wrk time sysbench valgrind)
conformance=(dpkg-dev)

pkgs=("${core[@]}")
case "$want" in
  core) ;;
  test) pkgs+=("${test[@]}") ;;
  bench) pkgs+=("${bench[@]}") ;;
  conformance) pkgs+=("${conformance[@]}") ;;
  all) pkgs+=("${test[@]}" "${bench[@]}") ;;
  *) echo "deps.sh: unknown set '$want' (core|test|bench|conformance|all)" >&2; exit 2 ;;
esac

missing=()
for p in "${pkgs[@]}"; do
  # Go may come from the machine image rather than Debian: accept any go on PATH.
  if [ "$p" = golang-go ] && command -v go >/dev/null 2>&1; then continue; fi
  # Rust likewise (rustup puts cargo in ~/.cargo/bin).
  if [ "$p" = cargo ] && { command -v cargo || [ -x "$HOME/.cargo/bin/cargo" ]; } >/dev/null 2>&1; then continue; fi
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "deps.sh: installing ${missing[*]}" >&2
SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
