#!/usr/bin/env bash
# Creates bench/proxy/.venv with LiteLLM's proxy for the proxy benchmark (idempotent) and prints
# the path of its `litellm`, which the bench takes as --litellm (and finds there by default).
# requirements.in says what is installed and why it is not plainly `litellm[proxy]`.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="$here/.venv"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
if ! "$venv/bin/python" -c 'import importlib.metadata as m; assert m.version("litellm") == "1.110.2"; import uvicorn, fastapi, orjson' 2>/dev/null; then
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$here/requirements.txt"
fi
echo "$venv/bin/litellm"
