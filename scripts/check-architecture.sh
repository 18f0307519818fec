#!/usr/bin/env bash
# Fails when a source file of a crate is missing from ARCHITECTURE.md's code map: every
# `crates/NAME/src/**/*.rs` must be named in the section "### `crates/NAME`" — as its path under
# `src/` (`pipeline/stages.rs`), or as its file name in a section that also names its folder
# (`web/` and `search.rs`); a folder's `mod.rs` by the folder. Fast: no build, bash and awk only.
set -euo pipefail
cd "$(dirname "$0")/.."

map=ARCHITECTURE.md
missing=0
while IFS= read -r file; do
  crate=${file#crates/}
  crate=${crate%%/*}
  rel=${file#"crates/$crate/src/"}
  section=$(awk -v head="### \`crates/$crate\`" '
    index($0, head) == 1 { on = 1; next }
    /^##/ { on = 0 }
    on { print }
  ' "$map")
  if [ -z "$section" ]; then
    echo "ARCHITECTURE.md has no section \"### \`crates/$crate\`\" for $file" >&2
    missing=1
    continue
  fi
  base=${rel##*/}
  named=no
  if [ "$rel" = "$base" ]; then
    grep -qF "$base" <<<"$section" && named=yes
  else
    dir=${rel%/*}
    if grep -qF "$rel" <<<"$section"; then
      named=yes
    elif [ "$base" = mod.rs ]; then
      grep -qF "$dir/" <<<"$section" && named=yes
    elif grep -qF "$dir/" <<<"$section" && grep -qF "$base" <<<"$section"; then
      named=yes
    fi
  fi
  if [ "$named" = no ]; then
    echo "ARCHITECTURE.md's section on crates/$crate does not name $rel ($file): add it to the code map" >&2
    missing=1
  fi
done < <(find crates/*/src -name '*.rs' | sort)

if [ "$missing" -ne 0 ]; then
  exit 1
fi
echo "ARCHITECTURE.md names every source file under crates/*/src."
