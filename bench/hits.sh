#!/usr/bin/env bash
# bench/hits.sh: cached-hit throughput of Weir next to nginx proxy_cache.
#
# What it measures
#   One small object (1 KB by default) that is already in the cache, fetched
#   over and over by wrk through each proxy in reverse mode. The headline
#   number is requests per CPU-second of the proxy process(es): wrk shares the
#   machine with the proxy, so wall-clock req/s mostly says how the cores were
#   split; the CPU the proxy burned per request does not depend on that.
#   Wall-clock req/s and wrk's latency p50/p99 are reported too.
#
#   Both proxies run at the same time, side by side, against one nginx origin
#   (a separate nginx master, so its CPU is never counted). Runs alternate
#   (Weir, nginx, Weir, nginx, ...) so drift hits both alike, and the table
#   shows the median of RUNS runs of each. Before each run, two requests check
#   that the object is served from cache (Weir: `Cache-Status: weir; hit`,
#   nginx: `X-Cache-Status: HIT`); CPU time is read from /proc/PID/stat
#   (utime+stime; for nginx the master plus all its workers) just before and
#   just after wrk.
#
# How to run (as root, or with sudo available, on Debian/Ubuntu: nginx, wrk
# and curl are installed with apt-get when missing)
#   bench/hits.sh                          # 1k, 3 runs of 10s, 64 connections
#   SIZE="1k 16k 256k" bench/hits.sh       # several object sizes
#   PROXIES=nginx bench/hits.sh            # nginx only (e.g. Weir not built)
#
# Environment
#   DURATION  wrk duration of one run (default 10s)
#   RUNS      runs per proxy and size; the median is reported (default 3)
#   CONNS     wrk connections (default 64)
#   THREADS   wrk threads (default 1)
#   SIZE      object sizes, space or comma separated: N, Nk or Nm (default 1k)
#   PROXIES   which proxies, in run order (default "weir nginx")
#   WEIR_BIN  Weir binary (default target/release/weir, built with
#             `cargo build --release -p weir` unless BUILD=0)
#   WEIR_EXTRA more of Weir's configuration, appended to its file as is; for example
#             WEIR_EXTRA=$'[server]\nscheduler = "per-core"' to compare schedulers
#   OUT_DIR   where raw results go (default bench/out)
#   KEEP_TMP  1 keeps the temporary directory (configs, logs) for debugging
#
# Output
#   A Markdown table on stdout; raw wrk output, per-run numbers (runs.tsv),
#   the configs used and the table in bench/out/hits-<UTC timestamp>/, and the
#   table again in bench/out/hits-latest.md.
#   All traffic stays on 127.0.0.1; everything started here is stopped on exit.

set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BENCH_TAG=hits
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

DURATION="${DURATION:-10s}"
RUNS="${RUNS:-3}"
CONNS="${CONNS:-64}"
THREADS="${THREADS:-1}"
SIZE="${SIZE:-1k}"
PROXIES="${PROXIES:-weir nginx}"
BUILD="${BUILD:-1}"
WEIR_BIN="${WEIR_BIN:-$ROOT/target/release/weir}"
WEIR_EXTRA="${WEIR_EXTRA:-}"
OUT_DIR="${OUT_DIR:-$ROOT/bench/out}"
KEEP_TMP="${KEEP_TMP:-0}"

read -r -a SIZES <<<"${SIZE//,/ }"
read -r -a PROXY_LIST <<<"${PROXIES//,/ }"
[ "${#SIZES[@]}" -gt 0 ] || die "SIZE is empty"
[ "${#PROXY_LIST[@]}" -gt 0 ] || die "PROXIES is empty"
for p in "${PROXY_LIST[@]}"; do
    case "$p" in weir|nginx) ;; *) die "unknown proxy '$p' in PROXIES (weir, nginx)";; esac
done
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer"
want() { local p; for p in "${PROXY_LIST[@]}"; do [ "$p" = "$1" ] && return 0; done; return 1; }

for s in "${SIZES[@]}"; do size_bytes "$s" >/dev/null; done

# ---------------------------------------------------------------- tools
ensure_tools nginx wrk curl
command -v getconf >/dev/null 2>&1 || die "getconf not found"
CLK_TCK="$(getconf CLK_TCK)"

if want weir; then
    if [ "$BUILD" = 1 ] && [ "$WEIR_BIN" = "$ROOT/target/release/weir" ]; then
        log "building weir (cargo build --release -p weir)"
        (cd "$ROOT" && cargo build --release -p weir) >&2 ||
            die "cargo build --release -p weir failed (PROXIES=nginx measures nginx alone)"
    fi
    [ -x "$WEIR_BIN" ] || die "no Weir binary at $WEIR_BIN (PROXIES=nginx measures nginx alone)"
fi

# ---------------------------------------------------------------- cleanup
TMP="$(mktemp -d "${TMPDIR:-/tmp}/weir-hits.XXXXXX")"
chmod 755 "$TMP" # nginx workers may run as another user
STARTED_PIDS=()
WRK_PID=""
SAVE_LOGS="origin-error.log nginx-error.log weir.log"
trap bench_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------- ports
USED_PORTS=" "
# pick_port runs in a subshell, so each pick is recorded here.
PORT_ORIGIN=$(pick_port); USED_PORTS+="$PORT_ORIGIN "
PORT_NGINX=$(pick_port);  USED_PORTS+="$PORT_NGINX "
PORT_WEIR=$(pick_port);   USED_PORTS+="$PORT_WEIR "
PORT_ADMIN=$(pick_port);  USED_PORTS+="$PORT_ADMIN "

# ---------------------------------------------------------------- content
mkdir -p "$TMP/www"
for s in "${SIZES[@]}"; do
    head -c "$(size_bytes "$s")" /dev/zero | tr '\0' 'x' >"$TMP/www/$s"
    chmod 644 "$TMP/www/$s"
done

# ---------------------------------------------------------------- configs
mkdir -p "$TMP/origin-temp" "$TMP/nginx-temp" "$TMP/nginx-cache"

# The origin: static files with a cache lifetime of an hour.
{
    nginx_conf_head origin
    cat <<EOF
worker_processes 1;
events { worker_connections 1024; }
http {
    access_log off;
    default_type application/octet-stream;
$(nginx_temp_paths origin)
    keepalive_requests 1000000;
    server {
        listen 127.0.0.1:$PORT_ORIGIN;
        root $TMP/www;
        location / {
            add_header Cache-Control "max-age=3600";
        }
    }
}
EOF
} >"$TMP/origin.conf"

# The nginx proxy: proxy_cache in front of the origin.
{
    nginx_conf_head nginx
    cat <<EOF
worker_processes 2;
events { worker_connections 4096; }
http {
    access_log off;
    default_type application/octet-stream;
    sendfile on;
    tcp_nopush on;
$(nginx_temp_paths nginx)
    keepalive_requests 1000000;
    keepalive_timeout 65s;
    proxy_cache_path $TMP/nginx-cache levels=1:2 keys_zone=bench:64m max_size=1g inactive=1h use_temp_path=off;
    upstream origin {
        server 127.0.0.1:$PORT_ORIGIN;
        keepalive 32;
    }
    server {
        listen 127.0.0.1:$PORT_NGINX;
        location / {
            proxy_pass http://origin;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_cache bench;
            proxy_cache_valid 200 1h;
            add_header X-Cache-Status \$upstream_cache_status;
        }
    }
}
EOF
} >"$TMP/nginx.conf"

cat >"$TMP/weir.toml" <<EOF
[admin]
listen = "127.0.0.1:$PORT_ADMIN"

[[listen]]
addr = "127.0.0.1:$PORT_WEIR"
mode = "reverse"
origin = "http://127.0.0.1:$PORT_ORIGIN"

[cache]
memory = "64MiB"
max_object = "8MiB"

[log]
access = "off"
$WEIR_EXTRA
EOF

# wrk prints one machine-readable line at the end, with exact percentiles.
wrk_report_lua >"$TMP/report.lua"

# ---------------------------------------------------------------- processes
start_nginx() { # $1 = name, $2 = port; sets LAST_PID
    nginx -t -q -e "$TMP/$1-error.log" -c "$TMP/$1.conf" >/dev/null 2>&1 ||
        { cat "$TMP/$1-error.log" >&2 || true; die "nginx rejected $TMP/$1.conf"; }
    nginx -e "$TMP/$1-error.log" -p "$TMP/" -c "$TMP/$1.conf" </dev/null >>"$TMP/$1-error.log" 2>&1 &
    LAST_PID=$!
    STARTED_PIDS+=("$LAST_PID")
    wait_ready "$1" "$LAST_PID" "$2"
}

start_nginx origin "$PORT_ORIGIN"
ORIGIN_PID=$LAST_PID
log "origin nginx pid $ORIGIN_PID on 127.0.0.1:$PORT_ORIGIN"
if want nginx; then
    start_nginx nginx "$PORT_NGINX"
    NGINX_PID=$LAST_PID
    log "nginx proxy_cache pid $NGINX_PID on 127.0.0.1:$PORT_NGINX"
fi
if want weir; then
    "$WEIR_BIN" check --config "$TMP/weir.toml" >/dev/null ||
        die "weir check rejected the config"
    WEIR_LOG="${WEIR_LOG:-warn}" "$WEIR_BIN" run --config "$TMP/weir.toml" \
        </dev/null >"$TMP/weir.log" 2>&1 &
    WEIR_PID=$!
    STARTED_PIDS+=("$WEIR_PID")
    wait_ready weir "$WEIR_PID" "$PORT_WEIR"
    log "weir pid $WEIR_PID on 127.0.0.1:$PORT_WEIR"
fi

children_of() { # $1 = pid: its direct children, without pgrep
    local parent="$1" f rest
    for f in /proc/[0-9]*/stat; do
        rest="$(cat "$f" 2>/dev/null)" || continue
        rest="${rest##*) }"  # fields from 3 (state) on; field 4 is the parent pid
        set -- $rest
        if [ "${2:-}" = "$parent" ]; then
            f="${f#/proc/}"; echo "${f%/stat}"
        fi
    done
}
proxy_pids() { # $1 = proxy
    case "$1" in
        weir) echo "$WEIR_PID";;
        nginx)
            echo "$NGINX_PID"
            if command -v pgrep >/dev/null 2>&1; then
                pgrep -P "$NGINX_PID" || true
            else
                children_of "$NGINX_PID"
            fi;;
    esac
}
proxy_port() { case "$1" in weir) echo "$PORT_WEIR";; nginx) echo "$PORT_NGINX";; esac; }

check_hit() { # $1 = proxy, $2 = size; fetch until a cache hit is seen (at most 5 tries)
    local url want_bytes i hdr out code got
    url="http://127.0.0.1:$(proxy_port "$1")/$2"
    want_bytes=$(size_bytes "$2")
    hdr="$TMP/headers"
    for i in 1 2 3 4 5; do
        if ! out="$(curl -sS -D "$hdr" -o /dev/null --max-time 5 -w '%{http_code} %{size_download}' "$url" 2>"$TMP/curl-error")"; then
            kill -0 "$(proxy_pids "$1" | head -n1)" 2>/dev/null || die "$1 is no longer running (its log is kept with the results)"
            die "$1: request $i to $url failed: $(cat "$TMP/curl-error")"
        fi
        code="${out%% *}"; got="${out##* }"
        [ "$code" = 200 ] || die "$1: $url answered $code"
        [ "$got" = "$want_bytes" ] || die "$1: $url returned $got bytes, expected $want_bytes"
        if [ "$i" -ge 2 ]; then
            case "$1" in
                weir) grep -qiE '^cache-status:.*weir; *hit' "$hdr" && return 0;;
                nginx) grep -qiE '^x-cache-status: *HIT' "$hdr" && return 0;;
            esac
        fi
    done
    log "$1: last response headers for $url:"; cat "$hdr" >&2
    die "$1: /$2 is not served from cache after 5 requests"
}

# ---------------------------------------------------------------- runs
RUN_ID="hits-$(date -u +%Y%m%dT%H%M%SZ)"
RAW="$OUT_DIR/$RUN_ID"
mkdir -p "$RAW"
cp "$TMP/origin.conf" "$RAW/origin-nginx.conf"
want nginx && cp "$TMP/nginx.conf" "$RAW/nginx-proxy.conf"
want weir && cp "$TMP/weir.toml" "$RAW/weir.toml"
# Configs name this run's temporary directory and ports; that's fine for raw data.
{
    echo "date_utc=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "nproc=$(nproc)"
    echo "cpu=$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
    echo "kernel=$(uname -r)"
    echo "nginx=$(nginx -v 2>&1 | sed 's/^nginx version: //')"
    echo "wrk=$(wrk -v 2>&1 | head -n1 | awk '{print $2}')"
    if want weir; then
        echo "weir=$("$WEIR_BIN" --version 2>/dev/null || echo unknown)"
        echo "weir_binary_built_utc=$(date -u -r "$WEIR_BIN" +%Y-%m-%dT%H:%M:%SZ)"
    fi
    echo "weir_commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo none)"
    echo "duration=$DURATION runs=$RUNS conns=$CONNS threads=$THREADS sizes=${SIZES[*]} proxies=${PROXY_LIST[*]}"
    echo "clk_tck=$CLK_TCK"
    echo "loadavg_before=$(cut -d' ' -f1-3 /proc/loadavg)"
} >"$RAW/env.txt"
# Other work on the machine skews even per-CPU numbers (caches, preemption).
LOAD1="$(cut -d' ' -f1 /proc/loadavg)"
if awk -v l="$LOAD1" 'BEGIN { exit !(l >= 0.5) }'; then
    log "warning: load average is $LOAD1 before starting; other work on the machine skews the numbers"
fi

TSV="$RAW/runs.tsv"
printf 'proxy\tsize\trun\trequests\tduration_s\tcpu_s\treq_per_cpu_s\treq_per_s_wall\tp50_us\tp99_us\tnon2xx\tsock_connect\tsock_read\tsock_write\tsock_timeout\n' >"$TSV"

measure() { # $1 = proxy, $2 = size, $3 = run number
    local proxy="$1" size="$2" run="$3" url pids pids_after loaders s0 s1 pid out stat
    url="http://127.0.0.1:$(proxy_port "$proxy")/$size"
    check_hit "$proxy" "$size"
    pids=$(proxy_pids "$proxy" | tr '\n' ' ')
    s0=$(cpu_snapshot $pids)
    loaders=" "
    for pid in $pids; do
        if grep -q 'cache loader' "/proc/$pid/cmdline" 2>/dev/null; then loaders+="$pid "; fi
    done
    out="$RAW/wrk-$proxy-$size-$run.txt"
    # In the background, so that a signal stops the script (and wrk) at once.
    wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency -s "$TMP/report.lua" "$url" >"$out" 2>&1 &
    WRK_PID=$!
    if ! wait "$WRK_PID"; then
        WRK_PID=""
        cat "$out" >&2
        die "wrk failed against $proxy"
    fi
    WRK_PID=""
    s1=$(cpu_snapshot $pids)
    kill -0 "$(proxy_pids "$proxy" | head -n1)" 2>/dev/null || die "$proxy exited during the run"
    # nginx's cache loader exits by itself about a minute after start; any
    # other process that came or went means CPU time went uncounted.
    pids_after=$(proxy_pids "$proxy" | tr '\n' ' ')
    for pid in $pids; do
        [[ " $pids_after " == *" $pid "* ]] || [[ "$loaders" == *" $pid "* ]] ||
            log "warning: $proxy process $pid exited during run $run; its CPU time is not counted"
    done
    for pid in $pids_after; do
        [[ " $pids " == *" $pid "* ]] ||
            log "warning: $proxy process $pid started during run $run; its CPU time is not counted"
    done
    stat="$(grep '^WRKSTAT ' "$out" | tail -n1)" || die "no WRKSTAT line in $out"
    awk -v proxy="$proxy" -v size="$size" -v run="$run" -v ticks="$(cpu_delta "$s0" "$s1")" -v hz="$CLK_TCK" '
        {
            for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
            cpu = ticks / hz
            dur = v["duration_us"] / 1e6
            rpc = cpu > 0 ? v["requests"] / cpu : 0
            printf "%s\t%s\t%s\t%d\t%.3f\t%.2f\t%.0f\t%.0f\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n",
                proxy, size, run, v["requests"], dur, cpu, rpc, v["requests"] / dur,
                v["p50_us"], v["p99_us"], v["status"], v["connect"], v["read"], v["write"], v["timeout"]
        }' <<<"$stat" >>"$TSV"
    tail -n1 "$TSV" | awk -F'\t' '{
        printf "[hits] %-5s %-5s run %s: %d req, %.2f CPU-s, %.0f req/CPU-s, %.0f req/s, p50 %d us, p99 %d us", $1, $2, $3, $4, $6, $7, $8, $9, $10
        if ($11 + $12 + $13 + $14 + $15 > 0) printf ", ERRORS non-2xx/3xx %d, socket connect %d read %d write %d timeout %d", $11, $12, $13, $14, $15
        printf "\n" }' >&2
}

log "sizes ${SIZES[*]}; ${RUNS} runs of ${DURATION} each, wrk -t$THREADS -c$CONNS; order ${PROXY_LIST[*]}"
for size in "${SIZES[@]}"; do
    for run in $(seq "$RUNS"); do
        for proxy in "${PROXY_LIST[@]}"; do
            measure "$proxy" "$size" "$run"
        done
    done
done

echo "loadavg_after=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$RAW/env.txt"

# ---------------------------------------------------------------- table
TABLE="$RAW/results.md"
awk -F'\t' -v order="${PROXY_LIST[*]}" -v sizes="${SIZES[*]}" '
    function median(list,    a, n, i, j, t) {
        n = split(list, a, " ")
        for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] + 0 > t + 0; j--) a[j + 1] = a[j]; a[j + 1] = t }
        return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    function ms(us) { return sprintf("%.2f ms", us / 1000) }
    function thousands(x,    s, r) {
        s = sprintf("%.0f", x); r = ""
        while (length(s) > 3) { r = "," substr(s, length(s) - 2) r; s = substr(s, 1, length(s) - 3) }
        return s r
    }
    NR > 1 {
        k = $1 SUBSEP $2
        wall[k] = wall[k] " " $8; rpc[k] = rpc[k] " " $7; p50[k] = p50[k] " " $9; p99[k] = p99[k] " " $10
        n[k]++; non2xx[k] += $11; sock[k] += $12 + $13 + $14 + $15
    }
    END {
        print "| proxy | size | req/s (wall) | req/CPU-s | p50 | p99 | Weir/nginx (req/CPU-s) | errors |"
        print "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |"
        np = split(order, P, " "); ns = split(sizes, S, " ")
        for (s = 1; s <= ns; s++) {
            w = "weir" SUBSEP S[s]; g = "nginx" SUBSEP S[s]
            ratio = (n[w] && n[g]) ? sprintf("%.2fx", median(rpc[w]) / median(rpc[g])) : "n/a"
            for (p = 1; p <= np; p++) {
                k = P[p] SUBSEP S[s]
                if (!n[k]) continue
                err = (non2xx[k] + sock[k]) ? sprintf("non-2xx/3xx %d, socket %d", non2xx[k], sock[k]) : "none"
                printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", (P[p] == "weir" ? "Weir" : "nginx proxy_cache"), S[s],
                    thousands(median(wall[k])), thousands(median(rpc[k])), ms(median(p50[k])), ms(median(p99[k])),
                    (P[p] == "weir" ? ratio : ""), err
            }
        }
    }' "$TSV" >"$TABLE"
{
    echo
    echo "Median of $RUNS runs per row; wrk -t$THREADS -c$CONNS -d$DURATION --latency; errors are summed over the runs."
} >>"$TABLE"
cp "$TABLE" "$OUT_DIR/hits-latest.md"
log "raw results in ${RAW#"$ROOT"/}"
cat "$TABLE"
