#!/usr/bin/env bash
# bench/cluster.sh: a Weir cluster over etcd against one node and against independent
# nodes, under the PolyMix-style workload (`weir-bench polymix`), and what a purge's
# acknowledgment costs as the cluster grows.
#
# For each N in NODES it runs, with the same total cache memory (MEMORY, in MiB):
#   cluster      N nodes with [cluster] over one etcd, MEMORY/N each; the client's
#                connections are spread over the nodes (--proxy ... --also-proxy ...)
#   independent  N nodes without [cluster], MEMORY/N each, the same spread
# and once, for reference, one node with all of MEMORY. The hit ratio reported is the
# origin's view over the plateau (`not_from_origin_ratio`: answers the origin did not
# have to send), which is what a cluster is for. Then, on each cluster, PURGES purges
# are sent one after the other to node 1 and timed with curl: each is answered once
# every node has applied it, so this is the acknowledgment latency (p50, p99).
#
#   bench/cluster.sh                                  # NODES="2 4 8", 10 s fill, 30 s plateau
#   NODES="2 4" RATE=300 PLATEAU=60 bench/cluster.sh
#
# Needs etcd (Debian: etcd-server), curl and python3 (installed with apt-get when
# missing). Output: a Markdown table on stdout and in bench/out/cluster-<UTC>/table.md,
# with each run's report under <config>-<N>/. Everything stays on 127.0.0.1; what the
# script starts is stopped on exit.

set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BENCH_TAG=cluster
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

NODES="${NODES:-2 4 8}"
RATE="${RATE:-200}"
FILL="${FILL:-10}"
PLATEAU="${PLATEAU:-30}"
MEMORY="${MEMORY:-64}"
PURGES="${PURGES:-200}"
SEED="${SEED:-1}"
BUILD="${BUILD:-1}"
OUT_DIR="${OUT_DIR:-$ROOT/bench/out}"
# PROFILE=debug uses the debug builds (quicker to build; the hit ratios do not depend
# on it, the latencies a little).
PROFILE="${PROFILE:-release}"
BENCH_BIN="$ROOT/target/$PROFILE/weir-bench"
WEIR_BIN="$ROOT/target/$PROFILE/weir"

STARTED_PIDS=()
TMP="$(mktemp -d)"
trap bench_cleanup EXIT
trap 'exit 130' INT TERM

ensure_tools etcd:etcd-server curl:curl python3:python3
if [ "$BUILD" = 1 ]; then
    log "building weir and weir-bench ($PROFILE)"
    if [ "$PROFILE" = release ]; then
        (cd "$ROOT" && cargo build -q --release -p weir -p weir-bench)
    else
        (cd "$ROOT" && cargo build -q -p weir -p weir-bench)
    fi
fi
RAW="$OUT_DIR/cluster-$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$RAW"

# stop PID...: stops what this script started, by pid.
stop() {
    local pid i
    for pid in "$@"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "$@"; do
        for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
}

ETCD_PID=""
ETCD_URL=""
start_etcd() {
    local c p
    c=$(pick_port); USED_PORTS+="$c "
    p=$(pick_port); USED_PORTS+="$p "
    rm -rf "$TMP/etcd"
    etcd --name b --data-dir "$TMP/etcd" \
        --listen-client-urls "http://127.0.0.1:$c" --advertise-client-urls "http://127.0.0.1:$c" \
        --listen-peer-urls "http://127.0.0.1:$p" --initial-advertise-peer-urls "http://127.0.0.1:$p" \
        --initial-cluster "b=http://127.0.0.1:$p" >"$TMP/etcd.log" 2>&1 &
    ETCD_PID=$!
    STARTED_PIDS+=("$ETCD_PID")
    wait_ready etcd "$ETCD_PID" "$c"
    ETCD_URL="http://127.0.0.1:$c"
}

# start_nodes N MEMORY_MIB CLUSTER(0/1): starts N weir nodes; sets NODE_PIDS, NODE_PORTS
# and NODE_ADMINS.
start_nodes() {
    local n="$1" mem="$2" cluster="$3" i port admin peer conf
    NODE_PIDS=(); NODE_PORTS=(); NODE_ADMINS=()
    for i in $(seq "$n"); do
        port=$(pick_port); USED_PORTS+="$port "
        admin=$(pick_port); USED_PORTS+="$admin "
        peer=$(pick_port); USED_PORTS+="$peer "
        conf="$TMP/node$i.toml"
        cat >"$conf" <<CONF
[admin]
listen = "127.0.0.1:$admin"
[log]
access = "off"
[cache]
memory = "${mem}MiB"
max_object = "4MiB"
disk = "off"
[[listen]]
addr = "127.0.0.1:$port"
mode = "forward"
CONF
        if [ "$cluster" = 1 ]; then
            cat >>"$conf" <<CONF
[cluster]
etcd = ["$ETCD_URL"]
node = "n$i"
peer_addr = "127.0.0.1:$peer"
lease = "3s"
CONF
        fi
        "$WEIR_BIN" run --config "$conf" >"$TMP/node$i.log" 2>&1 &
        NODE_PIDS+=("$!"); STARTED_PIDS+=("$!")
        NODE_PORTS+=("$port"); NODE_ADMINS+=("$admin")
        wait_ready "weir node $i" "$!" "$port"
    done
    if [ "$cluster" = 1 ]; then
        # Every node sees every member before the load starts.
        for i in $(seq 100); do
            local joined=0 a
            for a in "${NODE_ADMINS[@]}"; do
                curl -s "http://127.0.0.1:$a/admin/cluster" | python3 -c "import json,sys; d=json.load(sys.stdin); sys.exit(0 if len(d['members'])==$n and d['in_touch'] else 1)" && joined=$((joined+1))
            done
            [ "$joined" = "$n" ] && return 0
            sleep 0.1
        done
        die "the nodes did not join"
    fi
}

# polymix NAME: runs the workload through the running nodes; prints the plateau's
# hit ratio as the origin saw it.
polymix() {
    local out="$RAW/$1" args=() i
    args=(--proxy "127.0.0.1:${NODE_PORTS[0]}")
    for i in "${NODE_PORTS[@]:1}"; do args+=(--also-proxy "127.0.0.1:$i"); done
    for i in "${NODE_PIDS[@]}"; do args+=(--proxy-pid "$i"); done
    "$BENCH_BIN" polymix "${args[@]}" --rate "$RATE" --fill-secs "$FILL" \
        --plateau-secs "$PLATEAU" --seed "$SEED" --out "$out" >"$out.log" 2>&1 ||
        die "polymix $1 failed: $(tail -3 "$out.log")"
    python3 -c "import json; r=json.load(open('$out/report.json')); print('%.3f' % r['plateau']['not_from_origin_ratio'])"
}

# purge_latency: PURGES purges at node 1, each timed; prints "p50 p99" in ms.
purge_latency() {
    local i
    for i in $(seq "$PURGES"); do
        curl -s -o /dev/null -w '%{time_total}\n' -X PURGE \
            -x "http://127.0.0.1:${NODE_PORTS[0]}" "http://127.0.0.1:8080/purge-$i"
    done | python3 -c "
import sys
v = sorted(float(x) * 1000 for x in sys.stdin)
q = lambda p: v[min(len(v) - 1, round((len(v) - 1) * p))]
print('%.1f %.1f' % (q(0.5), q(0.99)))"
}

machine_info >"$RAW/machine.txt" 2>/dev/null || true
log "one node, ${MEMORY} MiB"
start_nodes 1 "$MEMORY" 0
ONE=$(polymix one-1)
stop "${NODE_PIDS[@]}"

table="| N | one node (${MEMORY} MiB) | N independent nodes | cluster of N | purges acknowledged | purge ack p50 | purge ack p99 |
|---|---|---|---|---|---|---|"
for n in $NODES; do
    mem=$(( MEMORY / n ))
    log "N=$n: independent nodes, $mem MiB each"
    start_nodes "$n" "$mem" 0
    IND=$(polymix "independent-$n")
    stop "${NODE_PIDS[@]}"
    log "N=$n: a cluster, $mem MiB each"
    start_etcd
    start_nodes "$n" "$mem" 1
    CL=$(polymix "cluster-$n")
    read -r P50 P99 < <(purge_latency)
    ACKED=$(curl -s "http://127.0.0.1:${NODE_ADMINS[0]}/admin/cluster" |
        python3 -c "import json,sys; print(json.load(sys.stdin)['purges_acknowledged'])")
    stop "${NODE_PIDS[@]}"
    stop "$ETCD_PID"
    table+="
| $n | $ONE | $IND | $CL | $ACKED of $PURGES | $P50 ms | $P99 ms |"
done
printf '%s\n' "$table" | tee "$RAW/table.md"
log "results in $RAW"
