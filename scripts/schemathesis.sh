#!/usr/bin/env bash
# Checks the REST contract with schemathesis (pinned in tests/schemathesis/requirements.txt,
# installed once into target/schemathesis-venv): `st run`, every check, against `toolgate serve`
# on a free loopback port, with a temporary database and file root, in both modes — local (no
# principals; the document then asks for no token) and with principals (bearer tokens; the
# missing and wrong token cases included). Every failure fails the script. Settings live in
# tests/schemathesis/schemathesis.toml. Usage: scripts/schemathesis.sh [local|principals]...
# (TOOLGATE_BIN=PATH tests that binary instead of building one)
set -euo pipefail
cd "$(dirname "$0")/.."

venv="target/schemathesis-venv"
requirements="tests/schemathesis/requirements.txt"
config="tests/schemathesis/schemathesis.toml"
modes=("$@")
if [ "${#modes[@]}" -eq 0 ]; then modes=(local principals); fi

# shellcheck source=scripts/venv.sh
source scripts/venv.sh
pinned_venv "$venv" "$requirements" schemathesis

work="$(mktemp -d)"
# A private copy: another build sharing the target directory cannot swap it mid-run.
# TOOLGATE_BIN runs an already built binary instead of building one.
bin="$work/toolgate"
if [ -n "${TOOLGATE_BIN:-}" ]; then
  cp "$TOOLGATE_BIN" "$bin"
else
  echo "==> building toolgate"
  cargo build --quiet -p toolgate-cli
  cp "${CARGO_TARGET_DIR:-target}/debug/toolgate" "$bin"
fi
server=""
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# One run: a fresh server (database, root, config) for MODE, schemathesis against it.
run_mode() {
  local mode="$1" dir="$work/$1" port token="" auth=()
  mkdir -p "$dir/root"
  echo "hello" >"$dir/root/notes.txt"
  {
    echo "root = \"root\""
    if [ "$mode" = principals ]; then
      token="st-$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')"
      local hash
      hash="$(printf '%s' "$token" | sha256sum | cut -d' ' -f1)"
      printf '\n[principals.admin]\ntoken_sha256 = "%s"\ngrants = ["*"]\n' "$hash"
      auth=(-H "Authorization: Bearer $token")
    fi
  } >"$dir/toolgate.toml"
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  "$bin" --config "$dir/toolgate.toml" --db "sqlite:$dir/toolgate.db" \
    serve --http "127.0.0.1:$port" --grace 1 2>"$dir/server.log" &
  server=$!
  for _ in $(seq 1 100); do
    if curl -s -o /dev/null "http://127.0.0.1:$port/healthz"; then break; fi
    sleep 0.1
  done
  echo "==> schemathesis ($mode mode) against http://127.0.0.1:$port"
  local status=0
  # Every check runs: schemathesis enables them all by default. Not `--checks all`, which would
  # also override the few per-operation exceptions in schemathesis.toml (a command-line choice
  # wins over the file).
  "$venv/bin/st" --no-color --config-file "$config" run "http://127.0.0.1:$port/openapi.json" \
    "${auth[@]}" --report-dir "$dir/report" </dev/null | tee "$dir/st.log" || status=$?
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  server=""
  if [ "$status" -ne 0 ]; then
    echo "schemathesis failed in $mode mode (exit $status); server log:" >&2
    tail -n 50 "$dir/server.log" >&2
    return "$status"
  fi
}

failed=0
for mode in "${modes[@]}"; do
  run_mode "$mode" || failed=1
done
exit "$failed"
