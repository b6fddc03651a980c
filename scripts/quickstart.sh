#!/usr/bin/env bash
# Install dependencies, build, and start the main job: a small local pithd
# mesh of three nodes with the registry's sample bundle loaded at the seed
# and gossiped to the others. It waits until every node holds the sample
# record, then prints a line per node (events, records, the URL of the
# record's page). Any failure stops it with the reason and exit status 1.
# Stop the mesh with: bash scripts/quickstart.sh stop
#
# Environment (all optional; the README's command sets none):
#   PITH_QUICKSTART_BUILD  a built tree (cmake -B DIR): dependencies are not
#                          installed and nothing is built; its pithd and
#                          pithctl run the mesh
#   PITH_QUICKSTART_DIR    the mesh's directory [./mesh]
#   PITH_QUICKSTART_PORT   node i listens on 127.0.0.1:(PORT+i) [7411]
#   PITH_QUICKSTART_HTTP   node i serves HTTP on 127.0.0.1:(HTTP+i) [8411]
#   PITH_QUICKSTART_WAIT   seconds to wait for every node to hold the record [60]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${PITH_QUICKSTART_DIR:-mesh}
port=${PITH_QUICKSTART_PORT:-7411}
http=${PITH_QUICKSTART_HTTP:-8411}
wait_s=${PITH_QUICKSTART_WAIT:-60}
nodes=3
bundle=tests/data/bundle-AR7B3DEV.json
id=AR7B3DEVMOTSBRCCVXUCLYSRRE

if [ "${1:-}" = "stop" ]; then
  # without PITH_QUICKSTART_DIR, mesh.sh finds ./mesh or the last one started
  if [ -n "${PITH_QUICKSTART_DIR:-}" ]; then
    exec bash deploy/mesh.sh stop --dir "$dir"
  fi
  exec bash deploy/mesh.sh stop
fi
[ $# -eq 0 ] || { echo "quickstart.sh: unknown argument $1 (the only one is: stop)" >&2; exit 2; }

# how to stop it: as it was started (the README's command runs under sudo)
# (and the nodes' control sockets are then root's)
stop_cmd="bash scripts/quickstart.sh stop"
# a mesh in a directory of its own is stopped with the same directory
[ -z "${PITH_QUICKSTART_DIR:-}" ] ||
  stop_cmd="PITH_QUICKSTART_DIR=$(printf %q "$PITH_QUICKSTART_DIR") $stop_cmd"
as=
[ -z "${SUDO_USER:-}" ] || as="sudo "
stop_cmd="$as$stop_cmd"

fail() {
  echo "quickstart.sh: $*" >&2
  exit 1
}

build=${PITH_QUICKSTART_BUILD:-}
if [ -z "$build" ]; then
  bash scripts/deps.sh
  build=build
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$build" -j"$(nproc)"
fi
PITHD=$(cd "$build" && pwd)/node/pithd
PITHCTL=$(cd "$build" && pwd)/node/cli/pithctl
[ -x "$PITHD" ] && [ -x "$PITHCTL" ] || fail "no pithd or pithctl in $build (build it: cmake --build $build)"
export PITHD PITHCTL
"$PITHCTL" verify "$bundle" >/dev/null || fail "the sample bundle $bundle does not verify (run: $PITHCTL verify $bundle)"

# three nodes on 127.0.0.1:PORT.. (data in DIR/node-i, HTTP on HTTP..),
# the sample bundle submitted at the seed; gossip carries it to the others
bash deploy/mesh.sh start "$nodes" --base-port "$port" --http-port "$http" --dir "$dir" \
  --bundle "$bundle" ||
  fail "the mesh did not start (the lines above say why; logs: $dir/node-*.log; stop what started: $stop_cmd)"

# node_check I: sets line to "node-I  N events, M records  URL" and
# succeeds once node I holds the sample record (its page answers 200 and
# it has the seed's events); else sets why and fails
want_events=
line=
why=
node_check() {
  local i=$1 url="http://127.0.0.1:$((http + i))/pith/$id" out counts code
  if ! out=$("$PITHCTL" --node "$dir/node-$i/pithd.sock" --json status 2>&1); then
    why="its status does not answer: $out"
    return 1
  fi
  if ! counts=$(printf '%s' "$out" | python3 -c 'import json, sys; s = json.load(sys.stdin)["store"]; print(s["events"], s["records"])'); then
    why="its status is not what pithctl --json status prints: $out"
    return 1
  fi
  set -- $counts
  if [ "$1" -eq 0 ] || [ "$2" -eq 0 ] || { [ -n "$want_events" ] && [ "$1" -lt "$want_events" ]; }; then
    why="it holds $1 events in $2 records${want_events:+ (node-0: $want_events events)}"
    return 1
  fi
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$url") || code="no answer (curl exit $?)"
  if [ "$code" != 200 ]; then
    why="$url answers $code"
    return 1
  fi
  local rs=s
  [ "$2" = 1 ] && rs=
  line=$(printf 'node-%d  %d events, %d record%s  %s' "$i" "$1" "$2" "$rs" "$url")
}

lines=()
deadline=$((SECONDS + wait_s))
for ((i = 0; i < nodes; i++)); do
  until node_check "$i"; do
    [ "$SECONDS" -lt "$deadline" ] ||
      fail "node-$i does not hold the sample record $id after ${wait_s} s: $why (log: $dir/node-$i.log; the nodes still run: $stop_cmd)"
    sleep 0.2
  done
  # the seed's events are what the others must hold
  if [ -z "$want_events" ]; then
    want_events=${line#*  }
    want_events=${want_events%% events*}
  fi
  lines+=("$line")
done

echo
echo "The mesh holds the sample record on every node:"
printf '  %s\n' "${lines[@]}"
cat <<MSG

Try:
  curl -s http://127.0.0.1:$((http + 2))/pith/$id/state.json | $build/node/cli/pithctl canon | sha256sum
  curl -s 'http://127.0.0.1:$((http + 1))/api/pith-number/resolve?arxiv=2401.14489&json=true'
  curl -s http://127.0.0.1:$http/pith-mirrors.json   # node 0 and the peers that announced their URL
  $as$build/node/cli/pithctl --node $dir/node-0/pithd.sock status
Stop it with: $stop_cmd
MSG
