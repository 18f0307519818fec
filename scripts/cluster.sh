#!/usr/bin/env bash
# The cluster test: three `toolgate serve` instances on one PostgreSQL database behind HAProxy
# (round robin, not sticky, 127.0.0.1 only) — shared rate limits, definitions and their events
# across instances, kill -9 under load without a lost approval or audit entry. Installs Debian's
# haproxy when it is missing; builds the debug `toolgate` binary when it is missing.
#
# scripts/cluster.sh                 the check (scripts/test.sh runs it)
# scripts/cluster.sh --redis redis://127.0.0.1:6379
#                                    the rate-limit check with the limits counted in Redis
#                                    ([cluster] redis_url; scripts/test.sh runs it too)
# scripts/cluster.sh --throughput    the README's table: calls/s with 1, 2 and 3 instances
#                                    (a release binary: cargo build --release -p toolgate-cli)
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v haproxy >/dev/null 2>&1 && [ ! -x /usr/sbin/haproxy ]; then
  echo "installing Debian's haproxy"
  sudo=""
  if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
  if ! $sudo apt-get install -y -q --no-install-recommends haproxy </dev/null; then
    $sudo apt-get update -q </dev/null
    $sudo apt-get install -y -q --no-install-recommends haproxy </dev/null
  fi
fi
export PATH="$PATH:/usr/sbin"

target_dir="${CARGO_TARGET_DIR:-target}"
if [ "${1:-}" = "--throughput" ]; then
  shift
  cargo build --release --quiet -p toolgate-cli
  exec python3 scripts/cluster.py --throughput --binary "$target_dir/release/toolgate" "$@"
fi
cargo build --quiet -p toolgate-cli
exec python3 scripts/cluster.py --binary "$target_dir/debug/toolgate" "$@"
