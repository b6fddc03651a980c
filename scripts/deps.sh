#!/usr/bin/env bash
# Installs the Debian packages pith-mirror builds, tests and benchmarks with.
# Idempotent; needs root (or sudo) on Debian 12.
set -euo pipefail
PKGS=(build-essential cmake pkg-config clang libclang-rt-14-dev
      libevent-dev libsodium-dev libssl-dev libmsgpack-dev librocksdb-dev libjemalloc-dev
      python3 python3-cryptography jq curl libcurl4-openssl-dev rsync wrk
      zlib1g-dev libsqlite3-dev debhelper man-db groff-base chromium nginx wget)
# zlib1g-dev: gzip answers; libsqlite3-dev: the search index (issue 18);
# debhelper: the package test builds the .deb (dpkg-buildpackage, debian/);
# man-db and groff-base: the man_pages test renders the pages; chromium:
# the browser test (headless) looks at the pages as a person would; nginx:
# the site_nginx, nginx_cache and journey_cache_reader tests run it as the
# current user (the system service is not used); wget: the wget_mirror
# journey mirrors a node with it. Not here:
# prometheus (promtool, for metrics_names): the package starts a Prometheus
# server when installed; that test skips its promtool half without it.
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
