# Sourced by the test scripts that need Python packages: `pinned_venv VENV REQUIREMENTS MODULE...`
# creates VENV when missing and installs REQUIREMENTS (every line `name==version`) only when the
# venv does not already hold exactly those versions with the MODULEs importable, so a second run
# works offline. Sets `py` to the venv's python. PINNED_VENV_PYTHON names the python to create
# the venv with (default: python3 on PATH).
pinned_venv() {
  local venv="$1" requirements="$2"
  shift 2
  py="$venv/bin/python"
  if [ ! -x "$py" ]; then
    echo "==> creating $venv"
    "${PINNED_VENV_PYTHON:-python3}" -m venv "$venv"
  fi
  if ! "$py" - "$requirements" "$@" <<'PY' >/dev/null 2>&1
import importlib
import sys
from importlib.metadata import version
for line in open(sys.argv[1]):
    line = line.split("#", 1)[0].strip()
    if line:
        name, pinned = line.split("==")
        if version(name) != pinned:
            sys.exit(1)
for module in sys.argv[2:]:
    importlib.import_module(module)  # importable, not just recorded
PY
  then
    echo "==> installing $(grep -v '^#' "$requirements" | tr '\n' ' ')into $venv"
    "$py" -m pip install -q --disable-pip-version-check -r "$requirements" </dev/null
  fi
}
