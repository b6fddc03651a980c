#!/usr/bin/env bash
# Install dependencies, build, and start the main job: a pithd node with the
# registry's sample bundle loaded. Stop it with: bash scripts/quickstart.sh stop
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${PITH_DATA:-$PWD/run/node1}
if [ "${1:-}" = "stop" ]; then
  if [ -x deploy/mesh.sh ]; then exec bash deploy/mesh.sh stop; fi
  exit 0
fi
bash scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)"
PITHCTL=build/node/cli/pithctl
$PITHCTL verify tests/data/bundle-AR7B3DEV.json
if [ -x build/node/pithd ] && [ -f deploy/mesh.sh ]; then
  # a small local mesh, the sample bundle imported at its first node
  bash deploy/mesh.sh start 3 --import tests/data/bundle-AR7B3DEV.json
  bash deploy/mesh.sh status
else
  mkdir -p "$DATA"
  $PITHCTL --store "$DATA/store" import tests/data/bundle-AR7B3DEV.json
  $PITHCTL --store "$DATA/store" records
fi
