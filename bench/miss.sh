#!/usr/bin/env bash
# bench/miss.sh: cache misses per CPU-second of Weir, HAProxy and nginx, and Weir's
# memory once far more than its cache size has passed through it.
#
# Part "misses" (PART=misses)
#   Every request is a URL never asked before (a counter in the path, distinct per
#   wrk thread and per run), so every request is a miss that the proxy fetches from
#   the origin over a keep-alive connection and stores. Objects are SIZE bytes (1 KB
#   by default) with `Cache-Control: max-age=3600`. The origin is a separate nginx
#   (its CPU is never counted) that answers any URL under /<size>/ with that file.
#   The proxies run side by side in reverse mode:
#     Weir     the release build, memory cache CACHE_MEM, no disk tier by default
#              (WEIR_DISK=1 adds one), access log off
#     HAProxy  its small-object cache (`cache` section, `http-request cache-use`,
#              `http-response cache-store`), CACHE_MEM of shared memory, objects up
#              to 1 MB, `http-reuse always` to the origin
#     nginx    proxy_cache (keys on the URI, a keep-alive upstream block), 2
#              workers, access log off; its limit is NGINX_MAX_SIZE (4g), not
#              CACHE_MEM: nginx charges a 4 KB block per 1 KB file, and a limit
#              reached makes its cache manager delete files for the rest of the run,
#              which cost it more than 10x its misses/CPU-s in a first try
#   Each proxy first gets one round right after it started (its "first round":
#   the process is fresh and its cache empty), then RUNS rounds, in alternating
#   order (Weir, HAProxy, nginx, Weir, ...). The headline is misses per CPU-second
#   of the proxy's process tree (utime+stime from /proc/PID/stat of the master and
#   all its children, just before and just after wrk), the median of the RUNS
#   rounds. Wall req/s, p50/p99 and the p50 added to the origin's own (one round
#   straight to the origin, same load, per round) are reported too. Before each
#   round a fresh URL is fetched twice to check that the second is a hit (the proxy
#   really stores what it fetches).
#
# Part "memory" (PART=memory)
#   Weir alone, `[cache] memory = MEM_CACHE` (64MiB), first with `disk = "off"`,
#   then with a disk tier in the temporary directory, for each object mix of
#   MEM_MIXES: 1k, 16k, 256k, and "mixed" (each URL's counter picks one of
#   1k/16k/256k). A fresh Weir per case gets new URLs from wrk until at least
#   MEM_FACTOR (3) times MEM_CACHE of bodies has passed through it; then VmRSS and
#   VmHWM (/proc/PID/status) and `weir_cache_bytes` (admin /metrics) are read and
#   printed next to the configured size and the allowed bound (memory + 64 MiB).
#
# How to run (as root, or with sudo available, on Debian/Ubuntu: nginx, haproxy,
# wrk and curl are installed with apt-get when missing)
#   bench/miss.sh                          # both parts, defaults below
#   PART=misses RUNS=5 bench/miss.sh
#   PART=memory MEM_MIXES="1k mixed" bench/miss.sh
#
# Environment
#   PART        misses, memory or all (default all)
#   DURATION    wrk duration of one misses round (default 10s)
#   RUNS        rounds per proxy after the first; the median is reported (default 3),
#               and, for each proxy against Weir, the median of the rounds' own ratios
#               (Weir's round N over this proxy's round N) with their range
#   ORDER       fixed (default: PROXIES' order every round) or alternate (the order
#               reversed every other round, so that neither proxy always runs first)
#   CONNS       wrk connections (default 64)
#   THREADS     wrk threads (default 1)
#   SIZE        object size of the misses part: N, Nk or Nm (default 1k)
#   PROXIES     which proxies, in run order (default "weir haproxy nginx")
#   DIRECT      1 runs a round straight to the origin each round, for the added
#               latency (default 1)
#   CACHE_MEM   cache size of every proxy in the misses part, in MiB (default 256)
#   WEIR_DISK   1 gives Weir a disk tier in the misses part (default 0)
#   NGINX_MAX_SIZE  nginx's proxy_cache_path max_size (default 4g)
#   MEM_CACHE   Weir's memory tier in the memory part, in MiB (default 64)
#   MEM_MIXES   object mixes of the memory part (default "1k 16k 256k mixed")
#   MEM_FACTOR  multiples of MEM_CACHE to send through in each case (default 3)
#   MEM_STEP    wrk duration of one step of the memory part (default 5s)
#   MEM_MAX_STEPS  steps at most per case, to bound the time (default 40)
#   WEIR_BIN    Weir binary (default target/release/weir, built with
#               `cargo build --release -p weir` unless BUILD=0)
#   WEIR_BIN_B  a second Weir binary, run as proxy `weirb` (add it to PROXIES), with
#               the same configuration: two builds side by side in one run, the
#               table's last column giving Weir/weirb
#   WEIR_EXTRA_B  weirb's WEIR_EXTRA, when it differs (default: WEIR_EXTRA); with
#               WEIR_BIN_B=$WEIR_BIN, two configurations of one build side by side
#   WEIR_EXTRA  more of Weir's configuration, appended to its file as is; for example
#               WEIR_EXTRA=$'[server]\nscheduler = "per-core"' to compare schedulers
#   OUT_DIR     where raw results go (default bench/out)
#   KEEP_TMP    1 keeps the temporary directory (configs, logs) for debugging
#   SYSCALLS    1 also counts each proxy's system calls during every misses round
#               (`perf stat` on the kernel's syscall tracepoints, attached to the
#               proxy's processes and all their threads) and reports them per
#               request: all of them, and futex (cross-thread wake-ups),
#               epoll_wait/epoll_pwait, read/recvfrom/recvmsg/readv and
#               write/sendto/sendmsg/writev. Needs root (or perf_event_paranoid -1)
#               and tracefs; perf adds little overhead, but compare the counts, not
#               the CPU figures, of such a run
#
# Output
#   Markdown tables on stdout; raw wrk output, per-run numbers (runs.tsv,
#   memory.tsv), the configs and the tables in bench/out/miss-<UTC timestamp>/, and
#   the tables again in bench/out/miss-latest.md. Each round's line on stderr and its
#   row of runs.tsv (sys_share) also give the kernel's share of the proxy's CPU
#   (stime over utime + stime), to tell user-space cost from the kernel's. All
#   traffic stays on 127.0.0.1; everything started here is stopped on exit.

set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BENCH_TAG=miss
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

if [ "$#" -gt 0 ]; then
    sed -n '2,/^$/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
    exit 0
fi

PART="${PART:-all}"
DURATION="${DURATION:-10s}"
RUNS="${RUNS:-3}"
ORDER="${ORDER:-fixed}"
CONNS="${CONNS:-64}"
THREADS="${THREADS:-1}"
SIZE="${SIZE:-1k}"
PROXIES="${PROXIES:-weir haproxy nginx}"
DIRECT="${DIRECT:-1}"
CACHE_MEM="${CACHE_MEM:-256}"
WEIR_DISK="${WEIR_DISK:-0}"
NGINX_MAX_SIZE="${NGINX_MAX_SIZE:-4g}"
MEM_CACHE="${MEM_CACHE:-64}"
MEM_MIXES="${MEM_MIXES:-1k 16k 256k mixed}"
MEM_FACTOR="${MEM_FACTOR:-3}"
MEM_STEP="${MEM_STEP:-5s}"
MEM_MAX_STEPS="${MEM_MAX_STEPS:-40}"
BUILD="${BUILD:-1}"
WEIR_BIN="${WEIR_BIN:-$ROOT/target/release/weir}"
WEIR_EXTRA="${WEIR_EXTRA:-}"
OUT_DIR="${OUT_DIR:-$ROOT/bench/out}"
KEEP_TMP="${KEEP_TMP:-0}"
SYSCALLS="${SYSCALLS:-0}"

case "$PART" in misses|memory|all) ;; *) die "PART must be misses, memory or all";; esac
do_part() { [ "$PART" = all ] || [ "$PART" = "$1" ]; }
read -r -a PROXY_LIST <<<"${PROXIES//,/ }"
read -r -a MIXES <<<"${MEM_MIXES//,/ }"
for p in "${PROXY_LIST[@]}"; do
    case "$p" in weir|weirb|haproxy|nginx) ;; *) die "unknown proxy '$p' in PROXIES (weir, weirb, haproxy, nginx)";; esac
done
for m in "${MIXES[@]}"; do
    case "$m" in mixed) ;; *) size_bytes "$m" >/dev/null;; esac
done
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer"
[[ "$CACHE_MEM" =~ ^[1-9][0-9]*$ ]] || die "CACHE_MEM must be a number of MiB"
[[ "$MEM_CACHE" =~ ^[1-9][0-9]*$ ]] || die "MEM_CACHE must be a number of MiB"
size_bytes "$SIZE" >/dev/null
want() { local p; for p in "${PROXY_LIST[@]}"; do [ "$p" = "$1" ] && return 0; done; return 1; }
if ! do_part misses; then PROXY_LIST=(weir); fi

# ---------------------------------------------------------------- tools
tools=(nginx wrk curl)
do_part misses && want haproxy && tools+=(haproxy)
[ "$SYSCALLS" = 1 ] && tools+=(perf)
ensure_tools "${tools[@]}"
CLK_TCK="$(getconf CLK_TCK)"
if [ "$BUILD" = 1 ] && [ "$WEIR_BIN" = "$ROOT/target/release/weir" ]; then
    log "building weir (cargo build --release -p weir)"
    (cd "$ROOT" && cargo build --release -p weir) >&2 || die "cargo build --release -p weir failed"
fi
[ -x "$WEIR_BIN" ] || die "no Weir binary at $WEIR_BIN"

# ---------------------------------------------------------------- cleanup
TMP="$(mktemp -d "${TMPDIR:-/tmp}/weir-miss.XXXXXX")"
chmod 755 "$TMP" # nginx workers may run as another user
STARTED_PIDS=()
WRK_PID=""
SAVE_LOGS="origin-error.log nginx-error.log haproxy.log weir.log weirb.log weir-mem.log"
trap bench_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

USED_PORTS=" "
PORT_ORIGIN=$(pick_port); USED_PORTS+="$PORT_ORIGIN "
PORT_NGINX=$(pick_port);  USED_PORTS+="$PORT_NGINX "
PORT_HAPROXY=$(pick_port); USED_PORTS+="$PORT_HAPROXY "
PORT_WEIR=$(pick_port);   USED_PORTS+="$PORT_WEIR "
PORT_ADMIN=$(pick_port);  USED_PORTS+="$PORT_ADMIN "
PORT_WEIRB=$(pick_port);  USED_PORTS+="$PORT_WEIRB "
PORT_ADMINB=$(pick_port); USED_PORTS+="$PORT_ADMINB "

# ---------------------------------------------------------------- content
# One file per size; the origin answers /<size>/anything with it.
mkdir -p "$TMP/www"
for s in "$SIZE" 1k 16k 256k "${MIXES[@]}"; do
    [ "$s" = mixed ] && continue
    [ -f "$TMP/www/$s" ] && continue
    head -c "$(size_bytes "$s")" /dev/zero | tr '\0' 'x' >"$TMP/www/$s"
    chmod 644 "$TMP/www/$s"
done

# ---------------------------------------------------------------- configs
mkdir -p "$TMP/origin-temp" "$TMP/nginx-temp" "$TMP/nginx-cache"

# Two workers: the origin must not be what limits the proxies' rate.
{
    nginx_conf_head origin
    cat <<EOF
worker_processes 2;
events { worker_connections 4096; }
http {
    access_log off;
    default_type application/octet-stream;
$(nginx_temp_paths origin)
    keepalive_requests 1000000;
    server {
        listen 127.0.0.1:$PORT_ORIGIN;
        root $TMP/www;
        location ~ ^/([0-9]+[km]?)/ {
            add_header Cache-Control "max-age=3600";
            try_files /\$1 =404;
        }
    }
}
EOF
} >"$TMP/origin.conf"

{
    nginx_conf_head nginx
    cat <<EOF
worker_processes 2;
events { worker_connections 4096; }
http {
    access_log off;
    default_type application/octet-stream;
$(nginx_temp_paths nginx)
    keepalive_requests 1000000;
    keepalive_timeout 65s;
    proxy_cache_path $TMP/nginx-cache levels=1:2 keys_zone=bench:256m max_size=$NGINX_MAX_SIZE inactive=1h use_temp_path=off;
    upstream origin {
        server 127.0.0.1:$PORT_ORIGIN;
        keepalive 64;
        keepalive_requests 1000000;
    }
    server {
        listen 127.0.0.1:$PORT_NGINX;
        location / {
            proxy_pass http://origin;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_cache bench;
            proxy_cache_key \$uri;
            proxy_cache_valid 200 1h;
            add_header X-Cache-Status \$upstream_cache_status;
        }
    }
}
EOF
} >"$TMP/nginx.conf"

cat >"$TMP/haproxy.cfg" <<EOF
global
    nbthread 2
    maxconn 8192
    pidfile $TMP/haproxy.pid

defaults
    mode http
    timeout connect 5s
    timeout client 30s
    timeout server 30s
    option http-keep-alive

cache bench
    # Megabytes of shared memory for stored objects.
    total-max-size $CACHE_MEM
    # Bytes; every object of the memory mixes fits.
    max-object-size 1048576
    # The cap on a stored object's lifetime (default 60 s): the origin's max-age decides below it.
    max-age 86400

frontend bench
    bind 127.0.0.1:$PORT_HAPROXY
    default_backend origin

backend origin
    http-reuse always
    http-request cache-use bench
    http-response cache-store bench
    http-after-response set-header X-Cache-Status HIT if { res.cache_hit }
    http-after-response set-header X-Cache-Status MISS unless { res.cache_hit }
    server o1 127.0.0.1:$PORT_ORIGIN
EOF

weir_config() { # $1 = memory MiB, $2 = disk directory or "off"
    local disk='"off"'
    [ "$2" != off ] && disk="{ path = \"$2\", size = \"1GiB\" }"
    cat <<EOF
[admin]
listen = "127.0.0.1:$PORT_ADMIN"

[[listen]]
addr = "127.0.0.1:$PORT_WEIR"
mode = "reverse"
origin = "http://127.0.0.1:$PORT_ORIGIN"

[cache]
memory = "$1MiB"
max_object = "8MiB"
disk = $disk

[log]
access = "off"
$WEIR_EXTRA
EOF
}

# Every request a new URL: /<size>/<tag>/<thread>/<counter>, where tag is distinct
# per wrk run. Arguments: the tag, then the sizes (several: the counter picks one).
{
    cat <<'EOF'
local threads = 0
setup = function(thread)
  threads = threads + 1
  thread:set("tid", threads)
end
local counter = 0
local tag = "t"
local sizes = { "1k" }
init = function(args)
  tag = args[1] or tag
  if #args > 1 then
    sizes = {}
    for i = 2, #args do sizes[#sizes + 1] = args[i] end
  end
end
request = function()
  counter = counter + 1
  local s = sizes[(counter % #sizes) + 1]
  return wrk.format("GET", "/" .. s .. "/" .. tag .. "/" .. tostring(tid) .. "/" .. counter)
end
EOF
    wrk_report_lua
} >"$TMP/new-urls.lua"

# ---------------------------------------------------------------- processes
start_nginx() { # $1 = name, $2 = port; sets LAST_PID
    nginx -t -q -e "$TMP/$1-error.log" -c "$TMP/$1.conf" >/dev/null 2>&1 ||
        { cat "$TMP/$1-error.log" >&2 || true; die "nginx rejected $TMP/$1.conf"; }
    nginx -e "$TMP/$1-error.log" -p "$TMP/" -c "$TMP/$1.conf" </dev/null >>"$TMP/$1-error.log" 2>&1 &
    LAST_PID=$!
    STARTED_PIDS+=("$LAST_PID")
    wait_ready "$1" "$LAST_PID" "$2"
}
start_weir() { # $1 = config file, $2 = log file; sets WEIR_PID
    "$WEIR_BIN" check --config "$1" >/dev/null || die "weir check rejected $1"
    WEIR_LOG="${WEIR_LOG:-warn}" "$WEIR_BIN" run --config "$1" </dev/null >>"$2" 2>&1 &
    WEIR_PID=$!
    STARTED_PIDS+=("$WEIR_PID")
    wait_ready weir "$WEIR_PID" "$PORT_WEIR"
}
stop_pid() { # $1 = pid started here: TERM, KILL after 5 s
    local i
    kill -TERM "$1" 2>/dev/null || true
    for i in $(seq 50); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
    local keep=() p
    for p in "${STARTED_PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
    STARTED_PIDS=(${keep[@]+"${keep[@]}"})
}

children_of() { # $1 = pid: its direct children, without pgrep
    local parent="$1" f rest
    for f in /proc/[0-9]*/stat; do
        rest="$(cat "$f" 2>/dev/null)" || continue
        rest="${rest##*) }"
        set -- $rest
        if [ "${2:-}" = "$parent" ]; then
            f="${f#/proc/}"; echo "${f%/stat}"
        fi
    done
}
tree_pids() { # $1 = pid: it and its children
    echo "$1"
    if command -v pgrep >/dev/null 2>&1; then pgrep -P "$1" || true; else children_of "$1"; fi
}
proxy_pid() { case "$1" in weir) echo "$WEIR_PID";; weirb) echo "$WEIRB_PID";; haproxy) echo "$HAPROXY_PID";; nginx) echo "$NGINX_PID";; origin) echo "$ORIGIN_PID";; esac; }
proxy_port() { case "$1" in weir) echo "$PORT_WEIR";; weirb) echo "$PORT_WEIRB";; haproxy) echo "$PORT_HAPROXY";; nginx) echo "$PORT_NGINX";; origin) echo "$PORT_ORIGIN";; esac; }

RUN_ID="miss-$(date -u +%Y%m%dT%H%M%SZ)"
RAW="$OUT_DIR/$RUN_ID"
mkdir -p "$RAW"
{
    machine_info
    echo "nginx=$(nginx -v 2>&1 | sed 's/^nginx version: //')"
    command -v haproxy >/dev/null 2>&1 && echo "haproxy=$(haproxy -v 2>&1 | head -n1 | awk '{print $3}')"
    echo "weir_binary_built_utc=$(date -u -r "$WEIR_BIN" +%Y-%m-%dT%H:%M:%SZ)"
    echo "weir_commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo none)"
    echo "part=$PART duration=$DURATION runs=$RUNS conns=$CONNS threads=$THREADS size=$SIZE proxies=${PROXY_LIST[*]} cache_mem=${CACHE_MEM}MiB weir_disk=$WEIR_DISK nginx_max_size=$NGINX_MAX_SIZE"
    echo "mem_cache=${MEM_CACHE}MiB mem_mixes=${MIXES[*]} mem_factor=$MEM_FACTOR mem_step=$MEM_STEP"
    echo "clk_tck=$CLK_TCK"
    echo "loadavg_before=$(cut -d' ' -f1-3 /proc/loadavg)"
} >"$RAW/env.txt"
cp "$TMP/origin.conf" "$RAW/origin-nginx.conf"
warn_if_busy

start_nginx origin "$PORT_ORIGIN"
ORIGIN_PID=$LAST_PID
log "origin nginx pid $ORIGIN_PID on 127.0.0.1:$PORT_ORIGIN"

TAG_N=0
run_wrk() { # $1 = port, $2 = duration, $3 = output file, then the sizes; sets TAG
    local port="$1" dur="$2" out="$3"
    shift 3
    TAG_N=$((TAG_N + 1))
    TAG="r$TAG_N-$RANDOM"
    wrk -t"$THREADS" -c"$CONNS" -d"$dur" --latency -s "$TMP/new-urls.lua" \
        "http://127.0.0.1:$port" -- "$TAG" "$@" >"$out" 2>&1 &
    WRK_PID=$!
    if ! wait "$WRK_PID"; then WRK_PID=""; cat "$out" >&2; die "wrk failed on port $port"; fi
    WRK_PID=""
    grep -q '^WRKSTAT ' "$out" || { cat "$out" >&2; die "no WRKSTAT line in $out"; }
}

# ================================================================ part: misses
TABLES="$RAW/results.md"
: >"$TABLES"
if do_part misses; then
    want nginx && { cp "$TMP/nginx.conf" "$RAW/nginx-proxy.conf"; start_nginx nginx "$PORT_NGINX"; NGINX_PID=$LAST_PID; log "nginx proxy_cache pid $NGINX_PID"; }
    if want haproxy; then
        haproxy -c -q -f "$TMP/haproxy.cfg" >/dev/null || die "haproxy rejected $TMP/haproxy.cfg"
        cp "$TMP/haproxy.cfg" "$RAW/haproxy.cfg"
        haproxy -db -f "$TMP/haproxy.cfg" </dev/null >"$TMP/haproxy.log" 2>&1 &
        HAPROXY_PID=$!
        STARTED_PIDS+=("$HAPROXY_PID")
        wait_ready haproxy "$HAPROXY_PID" "$PORT_HAPROXY"
        log "haproxy pid $HAPROXY_PID"
    fi
    if want weir; then
        wdisk=off
        [ "$WEIR_DISK" = 1 ] && wdisk="$TMP/weir-cache"
        weir_config "$CACHE_MEM" "$wdisk" >"$TMP/weir.toml"
        cp "$TMP/weir.toml" "$RAW/weir.toml"
        start_weir "$TMP/weir.toml" "$TMP/weir.log"
        log "weir pid $WEIR_PID"
    fi
    if want weirb; then
        [ -x "${WEIR_BIN_B:-}" ] || die "proxy weirb needs WEIR_BIN_B, a Weir binary"
        wdiskb=off
        [ "$WEIR_DISK" = 1 ] && wdiskb="$TMP/weirb-cache"
        WEIR_EXTRA="${WEIR_EXTRA_B-$WEIR_EXTRA}" weir_config "$CACHE_MEM" "$wdiskb" | sed -e "s/:$PORT_ADMIN\"/:$PORT_ADMINB\"/" \
            -e "s/:$PORT_WEIR\"/:$PORT_WEIRB\"/" >"$TMP/weirb.toml"
        cp "$TMP/weirb.toml" "$RAW/weirb.toml"
        "$WEIR_BIN_B" check --config "$TMP/weirb.toml" >/dev/null || die "weir (B) check rejected $TMP/weirb.toml"
        WEIR_LOG="${WEIR_LOG:-warn}" "$WEIR_BIN_B" run --config "$TMP/weirb.toml" </dev/null >>"$TMP/weirb.log" 2>&1 &
        WEIRB_PID=$!
        STARTED_PIDS+=("$WEIRB_PID")
        wait_ready weirb "$WEIRB_PID" "$PORT_WEIRB"
        log "weir (B, $WEIR_BIN_B) pid $WEIRB_PID"
    fi

    check_store() { # $1 = proxy: a new URL twice, the second must be a hit
        local url hdr i code
        url="http://127.0.0.1:$(proxy_port "$1")/$SIZE/check-$RANDOM-$RANDOM"
        hdr="$TMP/headers"
        for i in 1 2; do
            code="$(curl -sS -D "$hdr" -o /dev/null --max-time 5 -w '%{http_code}' "$url" 2>&1)" ||
                die "$1: $url failed: $code"
            [ "$code" = 200 ] || die "$1: $url answered $code"
        done
        case "$1" in
            weir|weirb) grep -qiE '^cache-status:.*weir; *hit' "$hdr" && return 0;;
            haproxy|nginx) grep -qiE '^x-cache-status: *HIT' "$hdr" && return 0;;
        esac
        log "$1: second response for $url:"; cat "$hdr" >&2
        die "$1: a fetched object is not served from cache the second time"
    }

    TSV="$RAW/runs.tsv"
    printf 'proxy\tround\trequests\tduration_s\tcpu_s\treq_per_cpu_s\treq_per_s_wall\tp50_us\tp99_us\tnon2xx\tsock_errors\tsys_share\n' >"$TSV"
    measure() { # $1 = proxy or origin, $2 = round (0 = first after start)
        local proxy="$1" round="$2" pids s0 s1 out stat
        [ "$proxy" = origin ] || check_store "$proxy"
        pids=$(tree_pids "$(proxy_pid "$proxy")" | tr '\n' ' ')
        s0=$(cpu_snapshot $pids)
        out="$RAW/wrk-$proxy-$round.txt"
        local perf_pid="" perf_out="$RAW/syscalls-$proxy-$round.csv"
        if [ "$SYSCALLS" = 1 ] && [ "$proxy" != origin ]; then
            perf stat -x, -o "$perf_out" -p "$(echo $pids | tr ' ' ',')" -e "$SYSCALL_EVENTS" &
            perf_pid=$!
            sleep 0.2
        fi
        run_wrk "$(proxy_port "$proxy")" "$DURATION" "$out" "$SIZE"
        if [ -n "$perf_pid" ]; then
            kill -INT "$perf_pid" 2>/dev/null || true
            wait "$perf_pid" 2>/dev/null || true
            syscall_row "$proxy" "$round" "$perf_out" "$(grep '^WRKSTAT ' "$out" | tail -n1)"
        fi
        s1=$(cpu_snapshot $pids)
        kill -0 "$(proxy_pid "$proxy")" 2>/dev/null || die "$proxy exited during round $round"
        [ "$(tree_pids "$(proxy_pid "$proxy")" | tr '\n' ' ')" = "$pids" ] ||
            log "warning: $proxy's processes changed during round $round; some CPU time may be uncounted"
        stat="$(grep '^WRKSTAT ' "$out" | tail -n1)"
        awk -v proxy="$proxy" -v run="$round" -v ticks="$(cpu_delta "$s0" "$s1")" -v sys="$(cpu_delta_sys "$s0" "$s1")" -v hz="$CLK_TCK" '
            {
                for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
                cpu = ticks / hz; dur = v["duration_us"] / 1e6
                printf "%s\t%s\t%d\t%.3f\t%.2f\t%.0f\t%.0f\t%d\t%d\t%d\t%d\t%.2f\n", proxy, run, v["requests"], dur, cpu,
                    (cpu > 0 ? v["requests"] / cpu : 0), v["requests"] / dur, v["p50_us"], v["p99_us"], v["status"],
                    v["connect"] + v["read"] + v["write"] + v["timeout"], (ticks > 0 ? sys / ticks : 0)
            }' <<<"$stat" >>"$TSV"
        tail -n1 "$TSV" | awk -F'\t' '{
            printf "[miss] %-7s round %s: %d req, %.2f CPU-s (%.0f%% kernel), %.0f req/CPU-s, %.0f req/s, p50 %d us, p99 %d us", $1, $2, $3, $5, $12 * 100, $6, $7, $8, $9
            if ($10 + $11 > 0) printf ", ERRORS non-2xx/3xx %d, socket %d", $10, $11
            printf "\n" }' >&2
    }

    SYSCALL_EVENTS="raw_syscalls:sys_enter,syscalls:sys_enter_futex,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_epoll_pwait"
    SYSCALL_EVENTS+=",syscalls:sys_enter_read,syscalls:sys_enter_recvfrom,syscalls:sys_enter_recvmsg,syscalls:sys_enter_readv"
    SYSCALL_EVENTS+=",syscalls:sys_enter_write,syscalls:sys_enter_sendto,syscalls:sys_enter_sendmsg,syscalls:sys_enter_writev"
    SYS_TSV="$RAW/syscalls.tsv"
    printf 'proxy\tround\trequests\tall\tfutex\tepoll_wait\treads\twrites\n' >"$SYS_TSV"
    syscall_row() { # $1 = proxy, $2 = round, $3 = perf's CSV, $4 = the WRKSTAT line
        # perf counts from just before wrk starts to just after it ends: the requests
        # are wrk's, which sent nothing else meanwhile.
        awk -F, -v proxy="$1" -v run="$2" -v stat="$4" '
            BEGIN { n = split(stat, f, " "); for (i = 2; i <= n; i++) { split(f[i], kv, "="); if (kv[1] == "requests") req = kv[2] } }
            $3 ~ /raw_syscalls:sys_enter/ { all += $1 }
            $3 ~ /sys_enter_futex/ { futex += $1 }
            $3 ~ /sys_enter_epoll_(p)?wait/ { ep += $1 }
            $3 ~ /sys_enter_(read|recvfrom|recvmsg|readv)$/ { rd += $1 }
            $3 ~ /sys_enter_(write|sendto|sendmsg|writev)$/ { wr += $1 }
            END { if (req > 0) printf "%s\t%s\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\n", proxy, run, req, all / req, futex / req, ep / req, rd / req, wr / req }
        ' "$3" >>"$SYS_TSV"
        tail -n1 "$SYS_TSV" | awk -F'\t' '{ printf "[miss] %-7s round %s: per request %s syscalls (futex %s, epoll_wait %s, reads %s, writes %s)\n", $1, $2, $4, $5, $6, $7, $8 }' >&2
    }
    log "misses: $SIZE objects, a first round then $RUNS rounds of $DURATION, wrk -t$THREADS -c$CONNS; order ${PROXY_LIST[*]}"
    for round in $(seq 0 "$RUNS"); do
        order=("${PROXY_LIST[@]}")
        if [ "$ORDER" = alternate ] && [ $((round % 2)) = 1 ]; then
            order=()
            for ((k = ${#PROXY_LIST[@]} - 1; k >= 0; k--)); do order+=("${PROXY_LIST[$k]}"); done
        fi
        for proxy in "${order[@]}"; do measure "$proxy" "$round"; done
        if [ "$DIRECT" = 1 ] && [ "$round" -gt 0 ]; then measure origin "$round"; fi
    done

    awk -F'\t' -v order="${PROXY_LIST[*]}" -v size="$SIZE" '
        function median(list,    a, n, i, j, t) {
            n = split(list, a, " ")
            for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] + 0 > t + 0; j--) a[j + 1] = a[j]; a[j + 1] = t }
            return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
        }
        function th(x,    s, r) {
            s = sprintf("%.0f", x); r = ""
            while (length(s) > 3) { r = "," substr(s, length(s) - 2) r; s = substr(s, 1, length(s) - 3) }
            return s r
        }
        function name(p) { return p == "weir" ? "Weir" : p == "weirb" ? "Weir (B)" : p == "haproxy" ? "HAProxy cache" : p == "nginx" ? "nginx proxy_cache" : "origin direct" }
        NR > 1 {
            if ($2 == 0) { first[$1] = $6; next }
            rpc[$1] = rpc[$1] " " $6; wall[$1] = wall[$1] " " $7; p50[$1] = p50[$1] " " $8; p99[$1] = p99[$1] " " $9
            at[$1, $2] = $6
            per[$1] = per[$1] (per[$1] == "" ? "" : " / ") th($6)
            n[$1]++; err[$1] += $10 + $11
        }
        END {
            print "| proxy | misses/CPU-s | first round (fresh process) | per round | req/s (wall) | p50 | p99 | p50 added vs origin | Weir/this (misses/CPU-s) | Weir/this, round by round | errors |"
            print "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
            np = split(order, P, " ")
            if (n["origin"]) { P[++np] = "origin" }
            w = n["weir"] ? median(rpc["weir"]) : 0
            for (i = 1; i <= np; i++) {
                p = P[i]; if (!n[p]) continue
                m = median(rpc[p])
                added = (p != "origin" && n["origin"]) ? sprintf("%.2f ms", (median(p50[p]) - median(p50["origin"])) / 1000) : ""
                ratio = (p != "origin" && p != "weir" && w) ? sprintf("%.2fx", w / m) : ""
                # The ratio within each round: a slowdown of the machine that lasts a few
                # rounds moves both proxies of a round alike, and cancels out here.
                paired = ""
                if (p != "origin" && p != "weir" && w) {
                    list = ""; lo = 0; hi = 0
                    for (r = 1; r <= n[p]; r++) {
                        if (!(("weir", r) in at) || !((p, r) in at) || at[p, r] == 0) continue
                        q = at["weir", r] / at[p, r]; list = list " " q
                        if (lo == 0 || q < lo) lo = q; if (q > hi) hi = q
                    }
                    if (list != "") paired = sprintf("%.3fx (%.2f–%.2f)", median(list), lo, hi)
                }
                printf "| %s | %s | %s | %s | %s | %.2f ms | %.2f ms | %s | %s | %s | %s |\n", name(p), th(m),
                    (p in first) ? th(first[p]) : "", per[p], th(median(wall[p])), median(p50[p]) / 1000,
                    median(p99[p]) / 1000, added, ratio, paired, err[p] ? err[p] : "none"
            }
        }' "$TSV" >"$RAW/misses.md"
    {
        echo "### Misses, $SIZE objects"
        echo
        cat "$RAW/misses.md"
        echo
        echo "Median of $RUNS rounds per row after a first round right after start (not in the median); "round by round": the median of the ratios of the rounds with the same number, and their range (ORDER=$ORDER); wrk -t$THREADS -c$CONNS -d$DURATION, every request a new URL; the origin's CPU is never in a proxy's row (the "origin direct" row is the origin alone, for the added latency); errors are summed over the rounds."
        echo
    } >>"$TABLES"
    # The memory part runs Weir alone.
    for proxy in "${PROXY_LIST[@]}"; do stop_pid "$(proxy_pid "$proxy")"; done
fi

# ================================================================ part: memory
if do_part memory; then
    MTSV="$RAW/memory.tsv"
    printf 'disk\tmix\tbody_bytes_sent\trequests\tsteps\tvmrss_kib\tvmhwm_kib\tcache_bytes\tcache_objects\terrors\n' >"$MTSV"
    want_bytes=$(( MEM_FACTOR * MEM_CACHE * 1024 * 1024 ))
    for disk in off on; do
        for mix in "${MIXES[@]}"; do
            ddir=off
            if [ "$disk" = on ]; then ddir="$TMP/weir-disk-$mix"; rm -rf "$ddir"; fi
            weir_config "$MEM_CACHE" "$ddir" >"$TMP/weir-mem.toml"
            cp "$TMP/weir-mem.toml" "$RAW/weir-mem-disk-$disk.toml"
            start_weir "$TMP/weir-mem.toml" "$TMP/weir-mem.log"
            sizes=("$mix"); [ "$mix" = mixed ] && sizes=(1k 16k 256k)
            sent=0 reqs=0 steps=0 errs=0
            while [ "$sent" -lt "$want_bytes" ]; do
                [ "$steps" -lt "$MEM_MAX_STEPS" ] || { log "warning: memory $disk/$mix: stopped after $steps steps, $sent bytes"; break; }
                steps=$((steps + 1))
                out="$RAW/wrk-mem-$disk-$mix-$steps.txt"
                run_wrk "$PORT_WEIR" "$MEM_STEP" "$out" "${sizes[@]}"
                read -r b r e < <(grep '^WRKSTAT ' "$out" | tail -n1 | awk '{
                    for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
                    printf "%.0f %.0f %.0f\n", v["bytes"], v["requests"], v["status"] + v["connect"] + v["read"] + v["write"] + v["timeout"] }')
                sent=$((sent + b)); reqs=$((reqs + r)); errs=$((errs + e))
            done
            kill -0 "$WEIR_PID" 2>/dev/null || die "weir exited during memory $disk/$mix"
            rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$WEIR_PID/status")
            hwm=$(awk '/^VmHWM:/ { print $2 }' "/proc/$WEIR_PID/status")
            metrics="$(curl -sS --max-time 5 "http://127.0.0.1:$PORT_ADMIN/metrics" || true)"
            cbytes=$(awk '$1 == "weir_cache_bytes" { printf "%.0f", $2 }' <<<"$metrics")
            cobj=$(awk '$1 == "weir_cache_objects" { printf "%.0f", $2 }' <<<"$metrics")
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$disk" "$mix" "$sent" "$reqs" "$steps" "$rss" "$hwm" \
                "${cbytes:-0}" "${cobj:-0}" "$errs" >>"$MTSV"
            log "memory disk=$disk mix=$mix: $((sent / 1048576)) MiB in $reqs requests, VmRSS $((rss / 1024)) MiB, VmHWM $((hwm / 1024)) MiB, weir_cache_bytes ${cbytes:-?}"
            stop_pid "$WEIR_PID"
        done
    done
    awk -F'\t' -v mem="$MEM_CACHE" '
        NR > 1 {
            bound = (mem + 64) * 1024
            printf "| %s | %s | %d | %d | %d MiB | **%.0f MiB** | %.0f MiB | %.1f MiB | %d MiB | %s | %s |\n", $1 == "on" ? "1GiB" : "off", $2,
                $3 / 1048576, $4, mem, $7 / 1024, $6 / 1024, $8 / 1048576, mem + 64,
                $7 <= bound ? "yes" : "**no**", $10 ? $10 : "none"
        }
        BEGIN {
            print "| disk | mix | MiB sent | requests | memory | VmHWM | VmRSS after | weir_cache_bytes | bound | within | errors |"
            print "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"
        }' "$MTSV" >"$RAW/memory.md"
    {
        echo "### Memory, Weir with [cache] memory = \"${MEM_CACHE}MiB\""
        echo
        cat "$RAW/memory.md"
        echo
        echo "A fresh Weir per row; new URLs (wrk -t$THREADS -c$CONNS, steps of $MEM_STEP) until at least $MEM_FACTOR x ${MEM_CACHE} MiB of responses passed; \"mixed\" cycles 1k/16k/256k. Bound: memory + 64 MiB."
        echo
    } >>"$TABLES"
fi

echo "loadavg_after=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$RAW/env.txt"
cp "$TABLES" "$OUT_DIR/miss-latest.md"
log "raw results in ${RAW#"$ROOT"/}"
cat "$TABLES"
