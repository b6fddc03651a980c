#!/usr/bin/env bash
# Install dependencies, build, and start the main job: a small local pithd
# mesh with the registry's sample bundle loaded. Stop it with: bash scripts/quickstart.sh stop
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "stop" ]; then
  exec bash deploy/mesh.sh stop
fi
bash scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)"
PITHCTL=build/node/cli/pithctl
$PITHCTL verify tests/data/bundle-AR7B3DEV.json
# a local mesh of three nodes on 127.0.0.1:7411-7413 (data in ./mesh, HTTP
# on 127.0.0.1:8411-8413), the registry's sample bundle submitted at the
# seed and gossiped to the others
bash deploy/mesh.sh start 3 --http-port 8411 --bundle tests/data/bundle-AR7B3DEV.json
sleep 1
bash deploy/mesh.sh status
cat <<MSG
Try:
  curl -s http://127.0.0.1:8413/pith/AR7B3DEVMOTSBRCCVXUCLYSRRE/state.json | build/node/cli/pithctl canon | sha256sum
  curl -s 'http://127.0.0.1:8412/api/pith-number/resolve?arxiv=2401.14489&json=true'
  curl -s http://127.0.0.1:8411/pith-mirrors.json   # node 0 and the peers that announced their URL
  build/node/cli/pithctl --node mesh/node-0/pithd.sock status
Stop it with: bash deploy/mesh.sh stop
MSG
