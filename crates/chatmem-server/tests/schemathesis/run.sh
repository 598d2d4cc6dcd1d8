#!/usr/bin/env bash
# Runs schemathesis (every check but one, below; every phase, stateful included) against `chatmem serve`'s own /openapi.json,
# twice: without --auth, then with --auth and a bearer token. The server runs on a free
# loopback port over a temporary SQLite store seeded with two conversations, in front of a
# loopback OpenAI-compatible model (model.py), so every route answers from real data. Fails on
# any failure of either run.
#   bash crates/chatmem-server/tests/schemathesis/run.sh [CHATMEM_BINARY]
# The binary: the argument, else $CHATMEM_BIN, else target/debug/chatmem. The venv (schemathesis
# at the versions requirements.txt pins): $SCHEMATHESIS_VENV, else target/schemathesis-venv.
# SCHEMATHESIS_MAX_EXAMPLES (default 50) bounds the cases per operation and phase, and
# SCHEMATHESIS_SEED (default 1) picks them, so a run is repeatable. Settings: schemathesis.toml;
# hooks.py fits what JSON Schema cannot say (evict_to below its budget, one budget in a query).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../../.." && pwd)"
bin="${1:-${CHATMEM_BIN:-$root/target/debug/chatmem}}"
venv="${SCHEMATHESIS_VENV:-$root/target/schemathesis-venv}"
max_examples="${SCHEMATHESIS_MAX_EXAMPLES:-50}"
st_seed="${SCHEMATHESIS_SEED:-1}"

if [ ! -x "$bin" ]; then
  echo "schemathesis: no chatmem binary at $bin (cargo build -p chatmem-cli)" >&2
  exit 1
fi
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt"

tmp="$(mktemp -d)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$tmp"
}
trap cleanup EXIT

# The loopback model; its first line is its base URL.
python3 "$here/model.py" >"$tmp/model.out" &
pids+=("$!")
for _ in $(seq 1 100); do
  [ -s "$tmp/model.out" ] && break
  sleep 0.1
done
upstream="$(head -n1 "$tmp/model.out")"
[ -n "$upstream" ] || { echo "schemathesis: the loopback model did not start" >&2; exit 1; }

# Starts `chatmem serve` with the extra arguments given; sets $url once /healthz answers.
start() {
  local name="$1"
  shift
  local log="$tmp/$name.log"
  env -u CHATMEM_STORE -u RUST_LOG "$bin" serve --listen 127.0.0.1:0 --store "sqlite:$tmp/$name.db" \
    --retention keep-history --max-messages 20 --upstream-base-url "$upstream" "$@" 2>"$log" &
  pids+=("$!")
  url=""
  for _ in $(seq 1 300); do
    url="$(grep -oE 'serving .* on http://127\.0\.0\.1:[0-9]+' "$log" | grep -oE 'http://.*' || true)"
    if [ -n "$url" ] && curl -fsS "$url/healthz" >/dev/null 2>&1; then
      return 0
    fi
    sleep 0.1
  done
  echo "schemathesis: chatmem serve ($name) did not come up:" >&2
  cat "$log" >&2
  exit 1
}

# Two conversations with a few messages each (a tool call and its result in one), so GETs
# find data.
seed() {
  local auth=("$@")
  curl -fsS -o /dev/null "${auth[@]}" -H 'Content-Type: application/json' \
    -d '{"messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi.", "metadata": {"source": "seed"}}]}' \
    "$url/v1/conversations/seed-1/messages"
  curl -fsS -o /dev/null "${auth[@]}" -H 'Content-Type: application/json' \
    -d '{"messages": [{"role": "user", "content": [{"type": "text", "text": "What time is it?"}]}, {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "clock", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "call_1", "content": "12:00"}, {"role": "assistant", "content": "Noon."}]}' \
    "$url/v1/conversations/seed-2/messages"
}

# One schemathesis run against $url; extra arguments go to schemathesis. Every check but
# use_after_free: writing messages to a deleted conversation's id (`POST …/{id}/messages`) starts
# it anew, as writing to any id does, and that check counts only the delete, so it reads the new
# conversation's answers as the deleted one's. That a deleted conversation answers 404 on every
# route is tested in tests/server/openapi.rs. One worker: with several, hypothesis's threads run
# ast.parse at once, which CPython 3.11.7 (this machine's python3) fails with "AST constructor
# recursion depth mismatch", an error of the interpreter's, not of the document.
fuzz() {
  local name="$1"
  shift
  local started=$SECONDS
  echo "schemathesis: $name run against $url" >&2
  local rc=0
  (cd "$tmp" && PYTHONPATH="$here" PYTHONDONTWRITEBYTECODE=1 SCHEMATHESIS_HOOKS=hooks \
    "$venv/bin/schemathesis" --config-file "$here/schemathesis.toml" run "$url/openapi.json" \
    --checks all \
    --exclude-checks use_after_free \
    --phases examples,coverage,fuzzing,stateful \
    --max-examples "$max_examples" \
    --workers 1 \
    --seed "$st_seed" \
    --request-timeout 10 \
    --generation-database none \
    --no-color \
    "$@") || rc=$?
  echo "schemathesis: $name run took $((SECONDS - started))s" >&2
  return "$rc"
}

failed=0

start open
seed
fuzz "no --auth" || failed=1

token="st-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
printf '[[token]]\ntoken = "%s"\ntenant = "schemathesis"\n' "$token" >"$tmp/tokens.toml"
start auth --auth "$tmp/tokens.toml"
seed -H "Authorization: Bearer $token"
fuzz "--auth" -H "Authorization: Bearer $token" || failed=1

if [ "$failed" -ne 0 ]; then
  echo "schemathesis: failures above" >&2
  exit 1
fi
echo "schemathesis: both runs clean" >&2
