#!/usr/bin/env bash
# End-to-end tests of the web Tool Manager in headless Chromium against a real `toolgate serve`
# (tests/ui/): Debian's chromium driven by playwright-core (no browser download), axe-core on
# every page, screenshots to target/ui-screenshots/
# (UPDATE_SCREENSHOTS=1: to docs/screenshots/, the ones the README shows). Idempotent: installs chromium when
# /usr/bin/chromium is missing and runs `npm ci` when tests/ui/node_modules is missing or older
# than package-lock.json. Works without a terminal (CI=true, no stdin).
set -euo pipefail
cd "$(dirname "$0")/.."
step() { printf '\n==> %s\n' "$*"; }

if [ ! -x /usr/bin/chromium ]; then
  step "installing Debian's chromium"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  if ! $sudo apt-get install -y -q --no-install-recommends chromium </dev/null; then
    $sudo apt-get update -q </dev/null
    $sudo apt-get install -y -q --no-install-recommends chromium </dev/null
  fi
fi

if ! command -v node >/dev/null 2>&1; then
  echo "ui-e2e: Node.js (18 or later) is needed to run the browser tests" >&2
  exit 2
fi

lock_sum="$(sha256sum tests/ui/package-lock.json | cut -d' ' -f1)"
stamp="tests/ui/node_modules/.toolgate-lock-sha256"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$lock_sum" ]; then
  step "npm ci (tests/ui: playwright-core, axe-core)"
  (cd tests/ui && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund </dev/null)
  echo "$lock_sum" > "$stamp"
fi

step "building toolgate"
cargo build --quiet -p toolgate-cli
target_dir="${CARGO_TARGET_DIR:-target}"
export TOOLGATE_BIN="$(cd "$target_dir" && pwd)/debug/toolgate"

step "web UI tests (headless Chromium, axe-core)"
AXE_REPORT="$(mktemp)"
export AXE_REPORT
trap 'rm -f "$AXE_REPORT"' EXIT
status=0
(cd tests/ui && node --test --test-concurrency=1 --test-reporter=spec ./*.test.js </dev/null) || status=$?

node - "$AXE_REPORT" <<'JS'
const fs = require('node:fs');
const runs = fs.readFileSync(process.argv[2], 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
const total = { critical: 0, serious: 0, moderate: 0, minor: 0 };
for (const r of runs) for (const k of Object.keys(total)) total[k] += r.counts[k] || 0;
console.log(`\naxe-core: ${runs.length} page states checked; violations: critical ${total.critical}, serious ${total.serious}, moderate ${total.moderate}, minor ${total.minor}`);
for (const r of runs.filter((x) => x.violations.length)) console.log(`  ${r.label}: ${r.violations.join(', ')}`);
JS
shots=target/ui-screenshots; [ "${UPDATE_SCREENSHOTS:-}" = 1 ] && shots=docs/screenshots
echo "screenshots: $(ls "$shots"/*.png 2>/dev/null | tr '\n' ' ')"
exit "$status"
