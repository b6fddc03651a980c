#!/usr/bin/env bash
# A local pithd mesh on loopback: N nodes, each with its own data directory.
#
#   deploy/mesh.sh start [N] [--base-port P] [--http-port H] [--dir DIR] [--bundle FILE]... [-- PITHD FLAGS]
#   deploy/mesh.sh status [--dir DIR]
#   deploy/mesh.sh stop [--dir DIR]
#
# Node i listens on 127.0.0.1:(P+i) (P defaults to 7411), keeps its data in
# DIR/node-i (DIR defaults to ./mesh), logs to DIR/node-i.log, and dials node
# 0 (the seed) and node i-1; peer exchange does the rest. --bundle FILE
# (repeatable) submits a registry bundle at node 0 once the mesh is up, and
# gossip carries it to every node. --http-port H serves node i's HTTP views
# on 127.0.0.1:(H+i), with that as its http_public_url (so each node's
# /pith-mirrors.json lists its peers). Flags after `--` go to every pithd.
# PITHD names the binary (default: build/node/pithd, then pithd on PATH).
#
# Only processes this script started are stopped, by the pid files it wrote.
# `start` remembers its DIR (in $XDG_STATE_HOME/pith-mesh/last-dir), so that
# `status` and `stop` without --dir find that mesh; when there is nothing to
# stop they say so and exit 1.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
cmd=${1:-}
[ $# -gt 0 ] && shift
n=5
base=7411
dir=./mesh
dir_given=
http=
bundles=()
extra=()
if [ "${1:-}" != "" ] && [[ "$1" =~ ^[0-9]+$ ]]; then n=$1; shift; fi
while [ $# -gt 0 ]; do
	case "$1" in
	--base-port) base=$2; shift 2 ;;
	--http-port) http=$2; shift 2 ;;
	--dir) dir=$2; dir_given=1; shift 2 ;;
	--bundle) bundles+=("$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"); shift 2 ;;
	--) shift; extra=("$@"); break ;;
	*) echo "mesh.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
pithd=${PITHD:-}
if [ -z "$pithd" ]; then
	if [ -x "$root/build/node/pithd" ]; then pithd=$root/build/node/pithd
	elif command -v pithd >/dev/null; then pithd=$(command -v pithd); fi
fi

# ctl SOCKET LINE: one control-socket request, its JSON reply on stdout.
ctl() {
	python3 - "$1" "$2" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(60)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode() + b"\n")
f = s.makefile("rb")
sys.stdout.write(f.readline().decode())
PY
}

# nodes: the node directories of $dir, in order; none (ls finds no match,
# which it says on stderr) is an empty answer, not an error
nodes() { ls -d "$dir"/node-*/ 2>/dev/null | sed 's:/$::' | sort -t- -k2 -n; }

state_file=${XDG_STATE_HOME:-$HOME/.local/state}/pith-mesh/last-dir

# Without --dir: the directory the last `start` used, if ./mesh has no nodes.
find_dir() {
	if [ -z "$dir_given" ] && [ -z "$(nodes)" ] && [ -f "$state_file" ]; then
		dir=$(cat "$state_file")
	fi
}

start() {
	[ -n "$pithd" ] && [ -x "$pithd" ] || { echo "mesh.sh: no pithd (build it, or set PITHD)" >&2; exit 1; }
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	# remembered for `status` and `stop` without --dir: a convenience, so
	# a state directory that cannot be written costs only that (said once)
	if ! { mkdir -p "$(dirname "$state_file")" && printf '%s\n' "$dir" >"$state_file"; }; then
		echo "mesh.sh: cannot write $state_file: give status and stop --dir $dir" >&2
	fi
	for ((i = 0; i < n; i++)); do
		d=$dir/node-$i
		mkdir -p "$d"
		if [ -f "$d/pithd.pid" ] && kill -0 "$(cat "$d/pithd.pid")" 2>/dev/null; then
			echo "node-$i already running (pid $(cat "$d/pithd.pid"))"
			continue
		fi
		args=(--data "$d" --listen "127.0.0.1:$((base + i))")
		[ "$i" -gt 0 ] && args+=(--peer "127.0.0.1:$base")
		[ "$i" -gt 1 ] && args+=(--peer "127.0.0.1:$((base + i - 1))")
		[ -n "$http" ] && args+=(--http "127.0.0.1:$((http + i))" \
			--http-public-url "http://127.0.0.1:$((http + i))")
		nohup "$pithd" "${args[@]}" "${extra[@]+"${extra[@]}"}" >>"$dir/node-$i.log" 2>&1 &
		echo $! >"$d/pithd.pid"
		echo "node-$i: pid $!, 127.0.0.1:$((base + i)), data $d${http:+, http://127.0.0.1:$((http + i))/}"
	done
	for ((i = 0; i < n; i++)); do
		pid=$(cat "$dir/node-$i/pithd.pid")
		for _ in $(seq 100); do
			[ -S "$dir/node-$i/pithd.sock" ] && break
			kill -0 "$pid" 2>/dev/null || break # exited: its log's last line says why
			sleep 0.1
		done
		if [ ! -S "$dir/node-$i/pithd.sock" ]; then
			echo "mesh.sh: node-$i did not start: $(tail -n 1 "$dir/node-$i.log" | cut -d' ' -f3-) (log: $dir/node-$i.log)" >&2
			exit 1
		fi
	done
	pithctl=${PITHCTL:-$(dirname "$pithd")/cli/pithctl}
	if [ ! -x "$pithctl" ]; then
		if command -v pithctl >/dev/null; then pithctl=$(command -v pithctl); else pithctl=; fi
	fi
	for b in "${bundles[@]+"${bundles[@]}"}"; do
		submit "$b"
	done
}

# submit FILE: FILE (a registry bundle) submitted at node 0, through
# pithctl when there is one, else the control socket's `bundle` command.
# A bundle the node refuses stops the script: a mesh that was asked for
# a bundle and lacks it is not the mesh that was asked for.
submit() {
	local b=$1 out summary
	if [ -n "$pithctl" ]; then
		if ! out=$("$pithctl" --node "$dir/node-0/pithd.sock" import --no-progress "$b" 2>&1); then
			echo "mesh.sh: the bundle $b did not go in at node-0: $out" >&2
			exit 1
		fi
		# pithctl's "bundles" line: whether it is now the newest at node 0
		summary=$(printf '%s\n' "$out" | sed -n 's/^bundles *//p')
	else
		if ! out=$(ctl "$dir/node-0/pithd.sock" "bundle $(tr -d '\n' <"$b")" 2>&1) ||
			! printf '%s' "$out" | python3 -c 'import json, sys; sys.exit(0 if json.load(sys.stdin).get("ok") else 1)' 2>/dev/null; then
			echo "mesh.sh: the bundle $b did not go in at node-0: $out" >&2
			exit 1
		fi
		summary=$out
	fi
	echo "bundle $b: submitted at node-0 ($summary)"
}

status() {
	find_dir
	if [ -z "$(nodes)" ]; then
		echo "mesh.sh: no mesh in $dir (give the --dir it was started with)" >&2
		exit 1
	fi
	for d in $(nodes); do
		name=$(basename "$d")
		pid=
		[ -f "$d/pithd.pid" ] && pid=$(cat "$d/pithd.pid")
		if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && [ -S "$d/pithd.sock" ]; then
			ctl "$d/pithd.sock" status | python3 -c '
import json, sys
s = json.load(sys.stdin)
ready = [p for p in s["peers"] if p["state"] == "ready"]
print("%-8s pid %-7s %-21s %6d events %5d records  %d peers  %d bans" % (
    sys.argv[1], sys.argv[2], s["listen"], s["store"]["events"], s["store"]["records"],
    len(ready), len(s["bans"])))' "$name" "$pid"
		else
			echo "$name   not running"
		fi
	done
}

stop() {
	find_dir
	stopped=0
	failed=
	for d in $(nodes); do
		[ -f "$d/pithd.pid" ] || continue
		pid=$(cat "$d/pithd.pid")
		if kill -0 "$pid" 2>/dev/null; then
			kill -TERM "$pid"
			for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
			if kill -0 "$pid" 2>/dev/null; then
				echo "mesh.sh: $(basename "$d") (pid $pid) did not stop within 30 s of SIGTERM; see $d.log (kill -KILL $pid ends it)" >&2
				failed=1
				continue
			fi
			echo "$(basename "$d"): stopped (pid $pid)"
			stopped=$((stopped + 1))
		fi
		rm -f "$d/pithd.pid"
	done
	[ -z "$failed" ] || exit 1
	if [ "$stopped" -eq 0 ]; then
		echo "mesh.sh: found nothing to stop in $dir (no running node started by this script there; give the --dir it was started with)" >&2
		exit 1
	fi
}

case "$cmd" in
start) start ;;
status) status ;;
stop) stop ;;
*) sed -n '2,17p' "$0" >&2; exit 2 ;;
esac
