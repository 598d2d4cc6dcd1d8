#!/usr/bin/env bash
# Creates the Python venv for the chatmem package's tests (clients/python/.venv, or the folder
# given as $1): the package from this folder with both extras (langchain, llama-index) and the
# pinned test tools, every dependency at the version constraints.txt pins; prints the path of
# its python.
#   PY=$(bash clients/python/setup.sh)   # then: $PY -m pytest -q clients/python/tests
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${1:-$here/.venv}"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip --quiet --disable-pip-version-check)
"${pip[@]}" install -c "$here/constraints.txt" -r "$here/requirements-dev.txt" "$here[langchain,llama-index]" >&2
# The package itself is always reinstalled, so the venv runs this folder's code.
"${pip[@]}" install --force-reinstall --no-deps "$here" >&2
echo "$venv/bin/python"
