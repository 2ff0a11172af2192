#!/usr/bin/env bash
# bench/connections.sh: what idle client connections cost Weir in memory.
#
# What it measures
#   Weir's resident memory (VmRSS, and the peak VmHWM, from /proc) with CONNS client
#   connections held open and idle, each after one completed request (HTTP/1.1
#   keep-alive, then HTTP/2 by prior knowledge), and with CONNS bare connections that
#   sent nothing. `weir-bench idle` opens and holds the connections; while they are
#   held, curl fetches the object on a new connection, to check that Weir keeps
#   serving other clients. Weir runs as a reverse proxy to a small nginx origin; the
#   object is cached before the connections open, so each of their requests is a hit.
#   A fresh Weir serves each measurement (memory freed by one mode would otherwise be
#   reused by the next); the table shows the median of RUNS runs.
#
#   With TLS=1 the same is measured on a TLS listener (a certificate made here with
#   openssl; HTTP/2 chosen by ALPN).
#
# How to run (as root, or with sudo available: nginx and curl are installed with
# apt-get when missing)
#   bench/connections.sh                  # 10,000 connections, 3 runs
#   CONNS=2000 RUNS=1 BUILD=0 bench/connections.sh
#   TLS=1 MODES="h1 h2" bench/connections.sh
#
#   Each connection takes a file descriptor in Weir and one in the client: the
#   script raises its open file limit (ulimit -n) to at least CONNS + 1024, and
#   stops if the hard limit (ulimit -Hn) does not allow it.
#
# Environment
#   CONNS     connections held (default 10000)
#   RUNS      runs of each mode; medians are reported (default 3)
#   MODES     any of h1 h2 bare, in run order (default "h1 h2 bare")
#   HOLD      seconds the connections stay open after all are held (default 5)
#   SIZE      the object's size: N, Nk or Nm (default 1k)
#   TLS       1: a TLS listener instead of clear text (default 0)
#   BUILD     0 uses the binaries as they are (default: cargo build --release)
#   WEIR_BIN  the Weir binary to measure (default target/release/weir), for example
#             a build kept from before a change (with BUILD=0)
#   OUT_DIR   where raw results go (default bench/out)
#   KEEP_TMP  1 keeps the temporary directory (configs, logs) for debugging
#
# Output
#   A Markdown table on stdout, and with the raw numbers (runs.tsv) and the configs
#   in bench/out/connections-<UTC timestamp>/, the table again in
#   bench/out/connections-latest.md. All traffic stays on 127.0.0.1; everything
#   started here is stopped on exit.

set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BENCH_TAG=connections
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

CONNS="${CONNS:-10000}"
RUNS="${RUNS:-3}"
MODES="${MODES:-h1 h2 bare}"
HOLD="${HOLD:-5}"
SIZE="${SIZE:-1k}"
TLS="${TLS:-0}"
BUILD="${BUILD:-1}"
OUT_DIR="${OUT_DIR:-$ROOT/bench/out}"
KEEP_TMP="${KEEP_TMP:-0}"
WEIR_BIN="${WEIR_BIN:-$ROOT/target/release/weir}"
BENCH_BIN="$ROOT/target/release/weir-bench"

read -r -a MODE_LIST <<<"${MODES//,/ }"
[ "${#MODE_LIST[@]}" -gt 0 ] || die "MODES is empty"
for m in "${MODE_LIST[@]}"; do
    case "$m" in h1|h2|bare) ;; *) die "unknown mode '$m' in MODES (h1, h2, bare)";; esac
done
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer"
[[ "$CONNS" =~ ^[1-9][0-9]*$ ]] || die "CONNS must be a positive integer"
[[ "$HOLD" =~ ^[0-9]+$ ]] || die "HOLD must be a number of seconds"
SIZE_BYTES="$(size_bytes "$SIZE")"

# ---------------------------------------------------------------- limits
NEED_FDS=$(( CONNS + 1024 ))
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt "$NEED_FDS" ]; then
    ulimit -n "$NEED_FDS" 2>/dev/null ||
        die "$CONNS connections need an open file limit of $NEED_FDS; the hard limit is $(ulimit -Hn) (raise it, or lower CONNS)"
fi

# ---------------------------------------------------------------- tools
ensure_tools nginx curl
[ "$TLS" = 1 ] && ensure_tools openssl
if [ "$BUILD" = 1 ]; then
    log "building weir and weir-bench (cargo build --release -p weir -p weir-bench)"
    (cd "$ROOT" && cargo build --release -p weir -p weir-bench) >&2 || die "cargo build failed"
fi
[ -x "$WEIR_BIN" ] || die "no Weir binary at $WEIR_BIN"
[ -x "$BENCH_BIN" ] || die "no weir-bench binary at $BENCH_BIN"

# ---------------------------------------------------------------- cleanup
TMP="$(mktemp -d "${TMPDIR:-/tmp}/weir-connections.XXXXXX")"
chmod 755 "$TMP" # nginx workers may run as another user
STARTED_PIDS=()
SAVE_LOGS="origin-error.log weir.log"
trap bench_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

USED_PORTS=" "
PORT_ORIGIN=$(pick_port); USED_PORTS+="$PORT_ORIGIN "
PORT_WEIR=$(pick_port);   USED_PORTS+="$PORT_WEIR "

# ---------------------------------------------------------------- origin
mkdir -p "$TMP/www" "$TMP/origin-temp"
head -c "$SIZE_BYTES" /dev/zero | tr '\0' 'x' >"$TMP/www/object"
chmod 644 "$TMP/www/object"
cat >"$TMP/origin.conf" <<EOF
$(nginx_conf_head origin)
worker_processes 1;
events { worker_connections 1024; }
http {
    access_log off;
    default_type application/octet-stream;
$(nginx_temp_paths origin)
    server {
        listen 127.0.0.1:$PORT_ORIGIN;
        root $TMP/www;
        location / { add_header Cache-Control "max-age=3600"; }
    }
}
EOF
nginx -t -q -e "$TMP/origin-error.log" -c "$TMP/origin.conf" >/dev/null 2>&1 ||
    { cat "$TMP/origin-error.log" >&2 || true; die "nginx rejected $TMP/origin.conf"; }
nginx -e "$TMP/origin-error.log" -p "$TMP/" -c "$TMP/origin.conf" </dev/null >>"$TMP/origin-error.log" 2>&1 &
ORIGIN_PID=$!
STARTED_PIDS+=("$ORIGIN_PID")
wait_ready origin "$ORIGIN_PID" "$PORT_ORIGIN"

# ---------------------------------------------------------------- weir
SCHEME=http
TLS_LINES=""
CLIENT_TLS=()
CURL_TLS=()
if [ "$TLS" = 1 ]; then
    SCHEME=https
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
        -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
        -keyout "$TMP/key.pem" -out "$TMP/cert.pem" >/dev/null 2>&1 || die "openssl could not make a certificate"
    TLS_LINES="tls = { certs = [{ cert = \"$TMP/cert.pem\", key = \"$TMP/key.pem\" }] }"
    CLIENT_TLS=(--tls-ca "$TMP/cert.pem")
    CURL_TLS=(--cacert "$TMP/cert.pem")
fi
cat >"$TMP/weir.toml" <<EOF
[[listen]]
addr = "127.0.0.1:$PORT_WEIR"
mode = "reverse"
origin = "http://127.0.0.1:$PORT_ORIGIN"
$TLS_LINES

[cache]
memory = "64MiB"

[log]
access = "off"
EOF
"$WEIR_BIN" check --config "$TMP/weir.toml" >/dev/null || die "weir check rejected the config"

WEIR_PID=""
start_weir() {
    WEIR_LOG="${WEIR_LOG:-warn}" "$WEIR_BIN" run --config "$TMP/weir.toml" \
        </dev/null >>"$TMP/weir.log" 2>&1 &
    WEIR_PID=$!
    STARTED_PIDS+=("$WEIR_PID")
    wait_ready weir "$WEIR_PID" "$PORT_WEIR"
}
forget_pid() { # $1 = a started process that has exited
    local kept=() p
    for p in "${STARTED_PIDS[@]}"; do [ "$p" = "$1" ] || kept+=("$p"); done
    STARTED_PIDS=("${kept[@]}")
}
stop_weir() {
    kill -TERM "$WEIR_PID" 2>/dev/null || true
    wait "$WEIR_PID" 2>/dev/null || true
    forget_pid "$WEIR_PID"
    WEIR_PID=""
}
mem_kib() { # $1 = VmRSS or VmHWM
    awk -v f="$1:" '$1 == f { print $2 }' "/proc/$WEIR_PID/status"
}
URL="$SCHEME://127.0.0.1:$PORT_WEIR/object"
fetch() { # prints "status size cache-status"
    rm -f "$TMP/headers"; touch "$TMP/headers"
    curl -sS "${CURL_TLS[@]}" --max-time 10 -o /dev/null -D "$TMP/headers" \
        -w '%{http_code} %{size_download}' "$URL" 2>>"$TMP/curl-error" || echo "failed 0"
    printf ' %s\n' "$(awk 'tolower($1) == "cache-status:" { $1 = ""; print }' "$TMP/headers" | tr -d '\r ' )"
}

# ---------------------------------------------------------------- runs
RUN_ID="connections-$(date -u +%Y%m%dT%H%M%SZ)"
RAW="$OUT_DIR/$RUN_ID"
mkdir -p "$RAW"
cp "$TMP/weir.toml" "$RAW/weir.toml"
{
    machine_info 2>/dev/null | grep -v '^wrk='
    echo "weir=$("$WEIR_BIN" --version 2>/dev/null || echo unknown)"
    echo "weir_commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo none)"
    echo "conns=$CONNS runs=$RUNS modes=${MODE_LIST[*]} hold=$HOLD size=$SIZE tls=$TLS"
    echo "loadavg_before=$(cut -d' ' -f1-3 /proc/loadavg)"
} >"$RAW/env.txt"
warn_if_busy

TSV="$RAW/runs.tsv"
printf 'mode\trun\tconns\tfailed\trss_before_kib\trss_held_kib\thwm_held_kib\trss_after_kib\tbytes_per_conn\tcurl_while_held\n' >"$TSV"

measure() { # $1 = mode, $2 = run
    local mode="$1" run="$2" before held hwm after out tool_pid i check opened failed
    start_weir
    # Twice: the first fills the cache, the second must be a hit.
    fetch >/dev/null
    check="$(fetch)"
    [[ "$check" == "200 $SIZE_BYTES "*hit* ]] || die "the object is not served from cache: $check"
    sleep 1
    before="$(mem_kib VmRSS)"
    out="$RAW/idle-$mode-$run.txt"
    "$BENCH_BIN" idle --addr "127.0.0.1:$PORT_WEIR" --mode "$mode" --conns "$CONNS" \
        --path /object --hold-secs "$HOLD" "${CLIENT_TLS[@]}" --max-secs 300 >"$out" 2>&1 &
    tool_pid=$!
    STARTED_PIDS+=("$tool_pid")
    for i in $(seq 3000); do
        grep -q '^held' "$out" && break
        kill -0 "$tool_pid" 2>/dev/null || break
        sleep 0.1
    done
    grep -q '^held' "$out" || { cat "$out" >&2; die "weir-bench idle did not hold its connections"; }
    held="$(mem_kib VmRSS)"; hwm="$(mem_kib VmHWM)"
    check="$(fetch)"
    if wait "$tool_pid"; then :; else cat "$out" >&2; die "weir-bench idle failed ($mode, run $run)"; fi
    forget_pid "$tool_pid"
    sleep 1
    after="$(mem_kib VmRSS)"
    kill -0 "$WEIR_PID" 2>/dev/null || die "weir exited during the run"
    stop_weir
    opened="$(sed -n 's/^opened .* conns=\([0-9]*\) .*/\1/p' "$out")"
    failed="$(sed -n 's/^opened .* failed=\([0-9]*\) .*/\1/p' "$out")"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$mode" "$run" "$opened" "$failed" \
        "$before" "$held" "$hwm" "$after" "$(( (held - before) * 1024 / (opened > 0 ? opened : 1) ))" \
        "${check// /_}" >>"$TSV"
    tail -n1 "$TSV" | awk -F'\t' '{
        printf "[connections] %-4s run %s: %s connections held, RSS %.1f -> %.1f MiB (+%.1f MiB, %s bytes each), after close %.1f MiB; curl meanwhile: %s\n",
            $1, $2, $3, $5 / 1024, $6 / 1024, ($6 - $5) / 1024, $9, $8 / 1024, $10 }' >&2
    [[ "$check" == "200 $SIZE_BYTES "* ]] || die "curl while the connections were held: $check"
}

log "$CONNS connections, modes ${MODE_LIST[*]}, $RUNS runs, held $HOLD s, ${SIZE} object, tls=$TLS"
for run in $(seq "$RUNS"); do
    for mode in "${MODE_LIST[@]}"; do
        measure "$mode" "$run"
    done
done
echo "loadavg_after=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$RAW/env.txt"

# ---------------------------------------------------------------- table
TABLE="$RAW/results.md"
awk -F'\t' -v order="${MODE_LIST[*]}" -v conns="$CONNS" '
    function median(list,    a, n, i, j, t) {
        n = split(list, a, " ")
        for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] + 0 > t + 0; j--) a[j + 1] = a[j]; a[j + 1] = t }
        return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    NR > 1 {
        m = $1; n[m]++
        before[m] = before[m] " " $5; held[m] = held[m] " " $6; hwm[m] = hwm[m] " " $7
        after[m] = after[m] " " $8; added[m] = added[m] " " ($6 - $5); per[m] = per[m] " " $9
        if ($10 !~ /^200_/) bad[m]++
        failed[m] += $4
    }
    END {
        print "| connections | mode | RSS before (MiB) | RSS held (MiB) | added (MiB) | bytes per connection | VmHWM (MiB) | RSS after close (MiB) | other client served meanwhile |"
        print "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
        k = split(order, M, " ")
        for (i = 1; i <= k; i++) {
            m = M[i]
            if (!n[m]) continue
            name = (m == "h1") ? "HTTP/1.1, one request each" : (m == "h2") ? "HTTP/2, one request each" : "bare, nothing sent"
            printf "| %s | %s | %.1f | %.1f | %.1f | %.0f | %.1f | %.1f | %s |\n", conns, name,
                median(before[m]) / 1024, median(held[m]) / 1024, median(added[m]) / 1024, median(per[m]),
                median(hwm[m]) / 1024, median(after[m]) / 1024,
                (bad[m] ? bad[m] " of " n[m] " runs FAILED" : "yes, every run") (failed[m] ? "; " failed[m] " connections failed" : "")
        }
    }' "$TSV" >"$TABLE"
{
    echo
    echo "Median of $RUNS runs per row; weir-bench idle --conns $CONNS, held $HOLD s; ${SIZE} object, tls=$TLS; a fresh Weir for each run."
} >>"$TABLE"
cp "$TABLE" "$OUT_DIR/connections-latest.md"
log "raw results in ${RAW#"$ROOT"/}"
cat "$TABLE"
