#!/usr/bin/env bash
# Starts a local 3-master Redis Cluster on 127.0.0.1:7000-7002 for the chatmem-redis
# cluster tests, then waits until it reports `cluster_state:ok`. Idempotent: nodes that
# already answer are left alone, and the cluster is only created when it is not yet ok.
# Use it with:
#   CHATMEM_TEST_REDIS_CLUSTER_URL=redis+cluster://127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002
set -euo pipefail

PORTS=(7000 7001 7002)
HOST=127.0.0.1
BASE_DIR=${CHATMEM_REDIS_CLUSTER_DIR:-/tmp/chatmem-redis-cluster}
REDIS_SERVER=${REDIS_SERVER:-redis-server}
REDIS_CLI=${REDIS_CLI:-redis-cli}

answers() { "$REDIS_CLI" -h "$HOST" -p "$1" ping 2>/dev/null | grep -q PONG; }
cluster_ok() { "$REDIS_CLI" -h "$HOST" -p "$1" cluster info 2>/dev/null | grep -q '^cluster_state:ok'; }

all_ok=1
for port in "${PORTS[@]}"; do
  cluster_ok "$port" || all_ok=0
done
if [ "$all_ok" = 1 ]; then
  echo "redis cluster on ports ${PORTS[*]} is already up"
  exit 0
fi

for port in "${PORTS[@]}"; do
  if answers "$port"; then
    continue
  fi
  dir="$BASE_DIR/$port"
  mkdir -p "$dir"
  # A node that is not running keeps no useful state (no persistence): start it clean so
  # an old nodes.conf cannot pin it to a cluster that no longer exists.
  rm -f "$dir/nodes-$port.conf"
  "$REDIS_SERVER" --port "$port" --bind "$HOST" \
    --cluster-enabled yes --cluster-config-file "$dir/nodes-$port.conf" \
    --cluster-node-timeout 5000 \
    --save "" --appendonly no --daemonize yes \
    --dir "$dir" --logfile "$dir/redis.log"
done

for port in "${PORTS[@]}"; do
  for _ in $(seq 1 50); do
    answers "$port" && break
    sleep 0.2
  done
  answers "$port" || { echo "redis node $port did not start (see $BASE_DIR/$port/redis.log)" >&2; exit 1; }
done

all_ok_within() {
  local tries=$1
  for _ in $(seq 1 "$tries"); do
    local ok=1
    for port in "${PORTS[@]}"; do
      cluster_ok "$port" || ok=0
    done
    [ "$ok" = 1 ] && return 0
    sleep 0.2
  done
  return 1
}

# A cluster that was already formed may just be converging (a node came back): give it a
# moment before rebuilding it.
slots_assigned=$("$REDIS_CLI" -h "$HOST" -p "${PORTS[0]}" cluster info | tr -d '\r' | sed -n 's/^cluster_slots_assigned://p')
if [ "${slots_assigned:-0}" != 0 ] && all_ok_within 15; then
  echo "redis cluster on ports ${PORTS[*]} is up"
  exit 0
fi

# Not ok: (re)create it. `--cluster create` refuses nodes that already know each other or
# hold slots or keys, so each node is emptied and reset first. These are throwaway test
# nodes without persistence: nothing of value is lost.
for port in "${PORTS[@]}"; do
  "$REDIS_CLI" -h "$HOST" -p "$port" flushall >/dev/null
  "$REDIS_CLI" -h "$HOST" -p "$port" cluster reset hard >/dev/null
done
nodes=()
for port in "${PORTS[@]}"; do nodes+=("$HOST:$port"); done
"$REDIS_CLI" --cluster create "${nodes[@]}" --cluster-replicas 0 --cluster-yes

if all_ok_within 100; then
  echo "redis cluster on ports ${PORTS[*]} is up"
  exit 0
fi
echo "redis cluster on ports ${PORTS[*]} did not reach cluster_state:ok" >&2
exit 1
