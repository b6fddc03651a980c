#!/usr/bin/env bash
# The whole test suite: installs dependencies, builds a normal and a
# sanitizer (ASan+UBSan) tree and runs ctest in both, then runs each
# libFuzzer target briefly from a clang tree.
# Long fuzzing and benchmarks are not part of it (README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
jobs=$(nproc)
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$jobs"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DPITH_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$jobs"
status=0
echo "== tests (release build)"
(cd build && ctest --output-on-failure -j"$jobs" -LE long) || status=1
echo "== tests (ASan+UBSan build)"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
   ctest --output-on-failure -j"$jobs" -LE 'long|nosan') || status=1
echo "== fuzzing (clang, libFuzzer: each target ${PITH_FUZZ_SECONDS:-20} s)"
CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPITH_FUZZ=ON \
  -DPITH_FUZZ_SECONDS="${PITH_FUZZ_SECONDS:-20}" >/dev/null
cmake --build build-fuzz -j"$jobs" --target fuzzers
(cd build-fuzz && ctest --output-on-failure -j"$jobs" -L fuzz) || status=1
exit $status
