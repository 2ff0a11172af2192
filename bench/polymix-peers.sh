#!/usr/bin/env bash
# bench/polymix-peers.sh: the PolyMix-style workload (`weir-bench polymix`) through
# Weir and other forward proxies from Debian, one after the other on the same machine.
#
# What it does
#   For each proxy in PROXIES (in that order, RUNS rounds, the order reversed every
#   other round so that drift touches all alike), it starts the proxy on a free
#   127.0.0.1 port from its config in bench/polymix/ (a forward proxy with a 256 MB
#   memory cache), runs `weir-bench polymix --proxy ... --proxy-pid ...` against it
#   (the same seed, so the same requests), stops it, and finally prints one table
#   from the runs' report.json files. Requests per CPU-second count every process
#   of the proxy (nginx: master and workers).
#
# How to run (as root or with sudo, on Debian: squid and nginx are installed with
# apt-get when missing; a system service the install starts is stopped again)
#   bench/polymix-peers.sh                           # weir squid nginx, 1 round
#   RATE=400 PLATEAU=120 PROXIES="weir squid" bench/polymix-peers.sh
#
# Environment
#   PROXIES   which proxies (default "weir squid nginx")
#   RUNS      rounds (default 1)
#   RATE      requests per second offered (default 200)
#   FILL      fill phase, seconds (default 30)
#   PLATEAU   plateau, seconds (default 90)
#   SEED      workload seed (default 1)
#   BUILD     0 skips `cargo build --release -p weir -p weir-bench`
#   OUT_DIR   where results go (default bench/out)
#   KEEP_TMP  1 keeps the temporary directory (configs, logs)
#
# Output: a Markdown table (medians over the rounds) on stdout and in bench/out/polymix-peers-<UTC>/table.md,
# with each run's report.md, report.json and polymix.svg under <proxy>-<round>/.
# All traffic stays on 127.0.0.1; everything started here is stopped on exit.

set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BENCH_TAG=polymix-peers
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

PROXIES="${PROXIES:-weir squid nginx}"
RUNS="${RUNS:-1}"
RATE="${RATE:-200}"
FILL="${FILL:-30}"
PLATEAU="${PLATEAU:-90}"
SEED="${SEED:-1}"
BUILD="${BUILD:-1}"
OUT_DIR="${OUT_DIR:-$ROOT/bench/out}"
BENCH_BIN="$ROOT/target/release/weir-bench"
WEIR_BIN="$ROOT/target/release/weir"

STARTED_PIDS=()
TMP="$(mktemp -d)"
SAVE_LOGS="squid-cache.log nginx-error.log weir.stderr"
trap bench_cleanup EXIT
trap 'exit 130' INT TERM

tools=(python3:python3)
for p in $PROXIES; do
    case "$p" in
        weir) ;;
        squid) tools+=(squid:squid) ;;
        nginx) tools+=(nginx:nginx) ;;
        *) die "unknown proxy '$p' (weir, squid, nginx)" ;;
    esac
done
had_squid=0; command -v squid >/dev/null 2>&1 && had_squid=1
ensure_tools "${tools[@]}"
# Debian's squid package starts its system service on 3128 when installed: not ours.
if [ "$had_squid" = 0 ] && command -v squid >/dev/null 2>&1 && command -v service >/dev/null 2>&1; then
    service squid stop >/dev/null 2>&1 || true
fi
if [ "$BUILD" != 0 ]; then
    log "building weir and weir-bench (release)"
    (cd "$ROOT" && cargo build --release -p weir -p weir-bench >&2)
fi
[ -x "$BENCH_BIN" ] || die "no $BENCH_BIN (build it, or BUILD=1)"

RAW="$OUT_DIR/polymix-peers-$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$RAW"
machine_info >"$RAW/env.txt" 2>/dev/null || true
warn_if_busy

# render NAME PORT: the proxy's config with its port and the temporary directory.
render() {
    sed -e "s|@PORT@|$2|g" -e "s|@TMP@|$TMP|g" "$ROOT/bench/polymix/$1" >"$TMP/$1.conf"
    cp "$TMP/$1.conf" "$RAW/${1%.in}"
    echo "$TMP/$1.conf"
}

# start_proxy NAME PORT: starts it; sets PIDS to the processes to measure (run it in
# this shell, not in $(...): STARTED_PIDS must see the pid for the cleanup).
start_proxy() {
    local name="$1" port="$2" conf pid
    case "$name" in
        weir)
            conf="$(render weir.toml.in "$port")"
            WEIR_LOG=warn "$WEIR_BIN" run --config "$conf" 2>"$TMP/weir.stderr" &
            pid=$!
            ;;
        squid)
            conf="$(render squid.conf.in "$port")"
            # Squid drops root for the `proxy` user: it must write its files here.
            chmod 777 "$TMP"
            squid -N -f "$conf" 2>>"$TMP/squid-cache.log" &
            pid=$!
            ;;
        nginx)
            conf="$(render nginx.conf.in "$port")"
            mkdir -p "$TMP/nginx-cache"
            nginx -c "$conf" -e "$TMP/nginx-error.log" 2>>"$TMP/nginx-error.log" &
            pid=$!
            ;;
    esac
    STARTED_PIDS+=("$pid")
    wait_ready "$name" "$pid" "$port"
    # nginx serves from its workers: count them with the master.
    PIDS=("$pid")
    mapfile -t -O 1 PIDS < <(pgrep -P "$pid" 2>/dev/null || true)
}

stop_proxy() {
    local pid="$1" i
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

for round in $(seq "$RUNS"); do
    order=($PROXIES)
    if [ $((round % 2)) = 0 ]; then
        mapfile -t order < <(printf '%s\n' "${order[@]}" | tac)
    fi
    for name in "${order[@]}"; do
        port="$(pick_port)"; USED_PORTS+="$port "
        start_proxy "$name" "$port"
        pids=("${PIDS[@]}")
        log "round $round: $name on 127.0.0.1:$port (pids ${pids[*]})"
        args=(polymix --proxy "127.0.0.1:$port" --rate "$RATE" --fill-secs "$FILL"
              --plateau-secs "$PLATEAU" --seed "$SEED" --out "$RAW/$name-$round")
        for p in "${pids[@]}"; do args+=(--proxy-pid "$p"); done
        "$BENCH_BIN" "${args[@]}" >/dev/null || log "$name: the run stopped early (see $RAW/$name-$round/report.md)"
        stop_proxy "${pids[0]}"
    done
done

# One row per proxy: the median of its rounds (requests per CPU-second per round too).
python3 - "$RAW" >"$RAW/table.md" <<'EOF'
import json, os, statistics, sys
raw = sys.argv[1]
runs = {}
for d in sorted(os.listdir(raw)):
    f = os.path.join(raw, d, "report.json")
    if not os.path.exists(f):
        continue
    name = d.rsplit("-", 1)[0]
    runs.setdefault(name, []).append(json.load(open(f)))
cols = [
    ("hit ratio", lambda r, p: 100 * p["hit_ratio"], "%.1f%%"),
    ("stored copies (serial)", lambda r, p: 100 * p["stored_copies_by_serial"] / max(p["ok"], 1), "%.1f%%"),
    ("byte hit ratio", lambda r, p: 100 * p["byte_hit_ratio"], "%.1f%%"),
    ("not from origin", lambda r, p: 100 * p["not_from_origin_ratio"], "%.1f%%"),
    ("origin requests", lambda r, p: p["origin"]["requests"], "%.0f"),
    ("hit p50 (ms)", lambda r, p: p["latency"]["hits"]["p50_ms"], "%.2f"),
    ("hit p99 (ms)", lambda r, p: p["latency"]["hits"]["p99_ms"], "%.2f"),
    ("miss p50 (ms)", lambda r, p: p["latency"]["misses"]["p50_ms"], "%.1f"),
    ("mean (ms)", lambda r, p: p["latency"]["all"]["mean_ms"], "%.1f"),
    ("req/CPU-s", lambda r, p: p["requests_per_cpu_second"] or float("nan"), "%.0f"),
    ("errors", lambda r, p: p["errors"], "%.0f"),
]
print("Plateau, the median of the rounds of each proxy (%s); each round's requests per "
      "CPU-second in brackets:\n" % ", ".join("%s: %d" % (k, len(v)) for k, v in runs.items()))
print("| proxy | " + " | ".join(c[0] for c in cols) + " |")
print("|---|" + "---:|" * len(cols))
for name, rs in runs.items():
    cells = []
    for title, f, fmt in cols:
        vals = [f(r, r["plateau"]) for r in rs]
        cell = fmt % statistics.median(vals)
        if title == "req/CPU-s" and len(vals) > 1:
            cell += " (" + ", ".join(fmt % v for v in vals) + ")"
        cells.append(cell)
    status = {r["status"] for r in rs}
    print("| %s%s | %s |" % (name, "" if status == {"complete"} else " (" + "; ".join(sorted(status)) + ")", " | ".join(cells)))
EOF
cat "$RAW/table.md"
log "results in $RAW"
