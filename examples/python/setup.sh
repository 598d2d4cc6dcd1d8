#!/usr/bin/env bash
# Creates the Python venv for the examples (examples/python/.venv, or the folder given as $1)
# with the pinned requirements from PyPI, and prints the path of its python.
#   bash examples/python/setup.sh            # then: examples/python/.venv/bin/python ...
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${1:-$here/.venv}"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt" >&2
echo "$venv/bin/python"
