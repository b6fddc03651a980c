#!/bin/sh
# Long fuzzing on demand: configure a clang build with -DPITH_FUZZ=ON, build
# one libFuzzer target and run it for a while.
#
#   tests/fuzz/run_fuzz.sh [TARGET] [SECONDS] [extra libFuzzer args...]
#   TARGET defaults to fuzz_json, SECONDS to 600.
#   BUILD_DIR (default build-fuzz) and JOBS (default 1) may be set.
#
# New inputs go to BUILD_DIR/tests/fuzz/work-NAME/corpus (the seed corpus
# in tests/fuzz/corpus/NAME is only read); crashes are written next to it
# as crash-* files. To keep an interesting input, minimise it and copy it
# into the seed corpus so the normal suite replays it.
set -eu

target=${1:-fuzz_json}
seconds=${2:-600}
[ $# -gt 0 ] && shift
[ $# -gt 0 ] && shift

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${BUILD_DIR:-$root/build-fuzz}
jobs=${JOBS:-1}
name=${target#fuzz_}

CC=clang cmake -S "$root" -B "$build" -DPITH_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" --target "$target" -j "$(nproc)"
build=$(cd "$build" && pwd) # the fuzzer runs from its work directory

work=$build/tests/fuzz/work-$name
mkdir -p "$work/corpus"
dict=
[ -f "$here/$name.dict" ] && dict=-dict=$here/$name.dict
par=
[ "$jobs" -gt 1 ] && par="-jobs=$jobs -workers=$jobs"

cd "$work"
exec "$build/tests/fuzz/$target" -max_total_time="$seconds" -max_len=8192 \
	-print_final_stats=1 -artifact_prefix="$work/" $par $dict "$@" "$work/corpus" "$here/corpus/$name"
