#!/usr/bin/env bash
# tests/install/check_install.sh BUILD_DIR WORK_DIR CMAKE INIT_CACHE -- what an engine's
# build does with nvfp4: install BUILD_DIR into a fresh prefix, then configure, build and run a
# separate project (consumer/) that only says find_package(nvfp4) and links nvfp4::nvfp4.
# Fails if the package, its dependencies, the headers or the library are incomplete. INIT_CACHE
# (cmake -C) gives the consumer the build's compiler, flags and toolchain file.
set -euo pipefail
build=$1 work=$2 cmake=$3 init=$4
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"
"$cmake" --install "$build" --prefix "$work/prefix" >/dev/null
for f in include/nvfp4/nvfp4.h include/nvfp4/cuda.h bin/nvfp4; do
  [ -e "$work/prefix/$f" ] || { echo "check_install: $f was not installed"; exit 1; }
done
# The prefix first; CMAKE_PREFIX_PATH from the environment (unpacked dependencies) after it.
args=(-C "$init" -S "$here/consumer" -B "$work/consumer"
      "-DCMAKE_PREFIX_PATH=$work/prefix${CMAKE_PREFIX_PATH:+;${CMAKE_PREFIX_PATH//:/;}}")
"$cmake" "${args[@]}" >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; exit 1; }
"$cmake" --build "$work/consumer" >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
"$work/consumer/consumer"
# The same program through pkg-config, as a build without CMake links it.
if command -v pkg-config >/dev/null; then
  cached() { sed -n "s/^set($1 \"\\(.*\\)\" CACHE.*/\\1/p" "$init"; }  # the build's compiler and flags
  cxx=$(cached CMAKE_CXX_COMPILER)
  flags=$(PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}" pkg-config --cflags --libs nvfp4) ||
    { echo "check_install: pkg-config --cflags --libs nvfp4 failed"; exit 1; }
  # shellcheck disable=SC2046,SC2086  # the flags are words
  "${cxx:-c++}" -std=c++17 -O1 $(cached CMAKE_CXX_FLAGS) "$here/consumer/main.cpp" -o "$work/consumer-pc" \
    $flags $(cached CMAKE_EXE_LINKER_FLAGS)
  "$work/consumer-pc"
else
  echo "check_install: no pkg-config here; the pkg-config file was installed but not tried"
fi
"$work/prefix/bin/nvfp4" --help >/dev/null
