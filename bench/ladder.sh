#!/usr/bin/env bash
# bench/ladder.sh: the API-cost ladder, five builds/configurations of Weir side by side.
#
# What it measures
#   The paper Weir follows measured what its module API costs, rung by rung
#   (docs/benchmarks.md, "The API-cost ladder"). This script does the same for Weir:
#     a  Weir built without module support
#        (cargo build --release -p weir --no-default-features, into target/ladder-base)
#     b  the normal build, no [[module]]
#     c  the normal build, [[module]] name = "empty"        (every event, does nothing)
#     d  the normal build, [[module]] name = "add-headers"  (4 headers on every path)
#     e  the normal build, [[module]] name = "body-copy"    (copies every body, + 4 headers)
#   and, when VARIANTS names them, issue 19's rungs:
#     h  the normal build, [[module]] name = "access" with the 20 rules and the htpasswd
#        file of bench/ladder-instructions.sh's rung h, the client sending
#        `Authorization` with that user's password (checked once, then from the
#        module's cache)
#     k  the normal build, no module, the client sending a field as long as h's under a
#        name a hit ignores (bench/ladder-instructions.sh explains why not the same one)
#   All five run at the same time in reverse mode, each with the default worker
#   threads (one per core), in front of one origin on loopback.
#
#   Cached hits: one object per size (1 KB and 16 KB by default), already in each
#   cache, fetched with `wrk -t1 -c64`. The headline number is requests per
#   CPU-second of the proxy process (utime+stime from /proc/PID/stat, all
#   threads, read just before and just after wrk); wall-clock req/s too.
#
#   Misses: the origin (a small python3 server) waits DELAY_MS before answering
#   /slow/* with a small body and `Cache-Control: no-store`, and wrk
#   (`-t1 -c8 --latency`) asks for a new URL every time, so every request is a
#   miss that goes to the origin. Reported: p50 and p99 of wrk's latency.
#
#   For reference, each round also sends the same miss load to the origin
#   directly (without a proxy): what the origin alone takes.
#
#   Runs alternate: each round measures every test on every variant in turn
#   (hit 1k: a b c d e, hit 16k: a b c d e, miss: origin a b c d e), RUNS rounds; the
#   table shows medians per variant, the ratio of each rung's hit req/CPU-s to
#   rung a's, and the difference of its miss p50 to rung a's.
#
#   Before each measurement, checks that: the object is a hit
#   (`Cache-Status: weir; hit`); the body is byte-identical to the origin's;
#   `x-weir-out-2` is there for d and e and absent otherwise; a /slow/ request is
#   a miss. Before the runs: rung a's binary refuses a [[module]] section (it
#   really has no module support).
#
# How to run (Debian/Ubuntu; wrk, curl and python3 are installed with apt-get,
# as root or through sudo, when missing)
#   bench/ladder.sh                                 # defaults: 3 rounds of 10 s runs
#   DURATION=3s RUNS=1 bench/ladder.sh              # a quick look
#   VARIANTS="a c" SIZES=1k bench/ladder.sh         # a subset
#
# Environment
#   DURATION  wrk duration of one run (default 10s)
#   RUNS      rounds; the median is reported (default 3)
#   SIZES     cached object sizes, space or comma separated: N, Nk or Nm (default "1k 16k")
#   DELAY_MS  origin delay of a miss, in ms (default 20)
#   VARIANTS  rungs to run, in run order (default "a b c d e")
#   ORDER     fixed: every round runs VARIANTS in that order (default); rotate:
#             round 2 starts with the second rung, round 3 with the third, ...
#             (a rung's place in the round then changes, so it does not bias it)
#   BUILD     1 builds both binaries first (default 1); 0 uses them as they are
#   CONNS     wrk connections for hits (default 64)
#   MISS_CONNS  wrk connections for misses (default 8)
#   MISS_DIRECT 1 also measures the misses on the origin alone, once per round (default 1)
#   WEIR_BIN       the normal build (default target/release/weir)
#   WEIR_BASE_BIN  the build without modules (default target/ladder-base/release/weir)
#   OUT_DIR   where raw results go (default bench/out)
#   KEEP_TMP  1 keeps the temporary directory (configs, logs) for debugging
#
# Output
#   A Markdown table on stdout; raw wrk output, per-run numbers (runs.tsv), the
#   configs, the servers' logs (when not empty), machine details (env.txt) and
#   the table in bench/out/ladder-<UTC timestamp>/, and the table again in
#   bench/out/ladder-latest.md. All traffic stays on 127.0.0.1; everything
#   started here is stopped on exit.

set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BENCH_TAG=ladder
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

DURATION="${DURATION:-10s}"
RUNS="${RUNS:-3}"
SIZES="${SIZES:-1k 16k}"
DELAY_MS="${DELAY_MS:-20}"
VARIANTS="${VARIANTS:-a b c d e}"
ORDER="${ORDER:-fixed}"
BUILD="${BUILD:-1}"
CONNS="${CONNS:-64}"
MISS_CONNS="${MISS_CONNS:-8}"
MISS_DIRECT="${MISS_DIRECT:-1}"
WEIR_BIN="${WEIR_BIN:-$ROOT/target/release/weir}"
BASE_TARGET_DIR="$ROOT/target/ladder-base"
WEIR_BASE_BIN="${WEIR_BASE_BIN:-$BASE_TARGET_DIR/release/weir}"
OUT_DIR="${OUT_DIR:-$ROOT/bench/out}"
KEEP_TMP="${KEEP_TMP:-0}"

read -r -a SIZE_LIST <<<"${SIZES//,/ }"
read -r -a VARIANT_LIST <<<"${VARIANTS//,/ }"
[ "${#SIZE_LIST[@]}" -gt 0 ] || die "SIZES is empty"
[ "${#VARIANT_LIST[@]}" -gt 0 ] || die "VARIANTS is empty"
seen=" "
for v in "${VARIANT_LIST[@]}"; do
    case "$v" in a|b|c|d|e|h|k) ;; *) die "unknown variant '$v' in VARIANTS (a, b, c, d, e, h, k)";; esac
    [[ "$seen" == *" $v "* ]] && die "variant '$v' twice in VARIANTS"
    seen+="$v "
done
for s in "${SIZE_LIST[@]}"; do size_bytes "$s" >/dev/null; done
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer"
[[ "$DELAY_MS" =~ ^[0-9]+$ ]] || die "DELAY_MS must be a whole number of milliseconds"
case "$ORDER" in fixed|rotate) ;; *) die "ORDER must be fixed or rotate";; esac
want() { local v; for v in "${VARIANT_LIST[@]}"; do [ "$v" = "$1" ] && return 0; done; return 1; }

module_of() { # the [[module]] of a variant, or nothing
    case "$1" in c) echo empty;; d) echo add-headers;; e) echo body-copy;; h) echo access;; *) ;; esac
}
client_header() { # the field a variant's client adds to every request, if any
    case "$1" in h) echo "$ACCESS_CREDENTIALS";; k) echo "$LIKE_CREDENTIALS";; *) ;; esac
}
bin_of() { if [ "$1" = a ]; then echo "$WEIR_BASE_BIN"; else echo "$WEIR_BIN"; fi; }
describe() {
    case "$1" in
        a) echo "built without module support";;
        b) echo "normal build, no module";;
        c) echo "module \`empty\` (all events, no-op)";;
        d) echo "module \`add-headers\` (4 headers)";;
        e) echo "module \`body-copy\` (copy bodies + 4 headers)";;
        h) echo "module \`access\` (20 rules, Basic credentials already checked)";;
        k) echo "normal build, no module, the client sending a field as long as (h)'s credentials";;
    esac
}

# ---------------------------------------------------------------- tools and builds
ensure_tools wrk curl python3
if want h; then
    command -v htpasswd >/dev/null ||
        { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq apache2-utils; }
fi
command -v getconf >/dev/null 2>&1 || die "getconf not found"
CLK_TCK="$(getconf CLK_TCK)"

need_normal=0
for v in "${VARIANT_LIST[@]}"; do [ "$v" != a ] && need_normal=1; done
if [ "$BUILD" = 1 ]; then
    if [ "$need_normal" = 1 ] && [ "$WEIR_BIN" = "$ROOT/target/release/weir" ]; then
        log "building weir (cargo build --release -p weir)"
        (cd "$ROOT" && env -u CARGO_TARGET_DIR cargo build --release -p weir) >&2 ||
            die "cargo build --release -p weir failed"
    fi
    if want a && [ "$WEIR_BASE_BIN" = "$BASE_TARGET_DIR/release/weir" ]; then
        log "building weir without modules (CARGO_TARGET_DIR=target/ladder-base cargo build --release -p weir --no-default-features)"
        (cd "$ROOT" && CARGO_TARGET_DIR="$BASE_TARGET_DIR" cargo build --release -p weir --no-default-features) >&2 ||
            die "cargo build --release -p weir --no-default-features failed"
    fi
fi
if [ "$need_normal" = 1 ]; then [ -x "$WEIR_BIN" ] || die "no Weir binary at $WEIR_BIN (BUILD=1 builds it)"; fi
if want a; then [ -x "$WEIR_BASE_BIN" ] || die "no Weir binary without modules at $WEIR_BASE_BIN (BUILD=1 builds it)"; fi

# ---------------------------------------------------------------- cleanup
TMP="$(mktemp -d "${TMPDIR:-/tmp}/weir-ladder.XXXXXX")"
STARTED_PIDS=()
WRK_PID=""
SAVE_LOGS="origin.log weir-a.log weir-b.log weir-c.log weir-d.log weir-e.log weir-h.log weir-k.log"
trap bench_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------- ports
USED_PORTS=" "
# pick_port runs in a subshell, so each pick is recorded here.
PORT_ORIGIN=$(pick_port); USED_PORTS+="$PORT_ORIGIN "
declare -A PORT PID
for v in "${VARIANT_LIST[@]}"; do
    PORT[$v]=$(pick_port); USED_PORTS+="${PORT[$v]} "
done

# ---------------------------------------------------------------- content
# Random bytes, so that "byte-identical to the origin's" means something.
mkdir -p "$TMP/www"
for s in "${SIZE_LIST[@]}"; do
    head -c "$(size_bytes "$s")" /dev/urandom >"$TMP/www/$s"
done

# The origin: the cached objects at /obj/<size> with `max-age=3600`, and behind
# /slow/<anything> a 512-byte body after DELAY_MS, with `no-store`. HTTP/1.1
# keep-alive; each answer leaves in one write (buffered, Nagle off), so no
# delayed-ACK stall adds to the miss time.
cat >"$TMP/origin.py" <<'EOF'
import os, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

root, port, delay = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]) / 1000.0
objects = {}
for name in os.listdir(root):
    with open(os.path.join(root, name), "rb") as f:
        objects["/obj/" + name] = f.read()
SLOW = bytes((i * 7 + 13) % 256 for i in range(512))

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    wbufsize = 1 << 20

    def do_GET(self):
        if self.path.startswith("/slow/"):
            time.sleep(delay)
            body, cc = SLOW, "no-store"
        elif self.path in objects:
            body, cc = objects[self.path], "max-age=3600"
        else:
            body, cc = b"not found\n", "no-store"
            self.send_response(404)
            self._finish(body, cc)
            return
        self.send_response(200)
        self._finish(body, cc)

    def _finish(self, body, cc):
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", cc)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024

Server(("127.0.0.1", port), Handler).serve_forever()
EOF
# The same 512 bytes, to compare miss bodies with.
python3 -c 'import sys; sys.stdout.buffer.write(bytes((i * 7 + 13) % 256 for i in range(512)))' >"$TMP/slow.body"

# ---------------------------------------------------------------- configs
# Cost 10, htpasswd's default: checked once per run, off the proxy's threads.
if want h; then htpasswd -cbB -C 10 "$TMP/users" "$ACCESS_USER" "$ACCESS_PASSWORD" 2>/dev/null; fi
for v in "${VARIANT_LIST[@]}"; do
    {
        cat <<EOF
[admin]
listen = "off"

[[listen]]
addr = "127.0.0.1:${PORT[$v]}"
mode = "reverse"
origin = "http://127.0.0.1:$PORT_ORIGIN"

[cache]
memory = "64MiB"
max_object = "8MiB"

[log]
access = "off"
EOF
        m="$(module_of "$v")"
        if [ -n "$m" ]; then printf '\n[[module]]\nname = "%s"\n' "$m"; fi
        if [ "$v" = h ]; then access_settings "$TMP/users"; fi
    } >"$TMP/weir-$v.toml"
done

# wrk: the report line; for misses, also a new path for every request.
wrk_report_lua >"$TMP/report.lua"
{
    cat <<'EOF'
local prefix, n = "x", 0
init = function(args) prefix = args[1] or prefix end
request = function()
  n = n + 1
  return wrk.format("GET", "/slow/" .. prefix .. "-" .. n)
end
EOF
    wrk_report_lua
} >"$TMP/miss.lua"

# ---------------------------------------------------------------- processes
python3 "$TMP/origin.py" "$TMP/www" "$PORT_ORIGIN" "$DELAY_MS" </dev/null >"$TMP/origin.log" 2>&1 &
ORIGIN_PID=$!
STARTED_PIDS+=("$ORIGIN_PID")
wait_ready origin "$ORIGIN_PID" "$PORT_ORIGIN"
log "origin (python3, ${DELAY_MS} ms misses) pid $ORIGIN_PID on 127.0.0.1:$PORT_ORIGIN"
# "o" is the origin itself, measured for misses only.
PORT[o]=$PORT_ORIGIN
PID[o]=$ORIGIN_PID

# The origin itself must serve the exact bytes.
for s in "${SIZE_LIST[@]}"; do
    curl -sS --max-time 5 -o "$TMP/direct" "http://127.0.0.1:$PORT_ORIGIN/obj/$s" ||
        die "origin: /obj/$s failed"
    cmp -s "$TMP/direct" "$TMP/www/$s" || die "origin: /obj/$s is not the file it should serve"
done

# Rung a must really be without module support: it refuses a [[module]].
if want a; then
    printf '\n[[module]]\nname = "empty"\n' | cat "$TMP/weir-a.toml" - >"$TMP/weir-a-with-module.toml"
    if "$WEIR_BASE_BIN" check --config "$TMP/weir-a-with-module.toml" >"$TMP/check-a.out" 2>&1; then
        die "$WEIR_BASE_BIN accepts a [[module]]: it was built with module support (rung a needs --no-default-features)"
    fi
    grep -qi 'module' "$TMP/check-a.out" ||
        log "warning: rung a's binary rejected a [[module]] config, but not clearly for modules: $(cat "$TMP/check-a.out")"
fi

for v in "${VARIANT_LIST[@]}"; do
    bin="$(bin_of "$v")"
    "$bin" check --config "$TMP/weir-$v.toml" >/dev/null || die "weir check rejected the config of rung $v"
    WEIR_LOG="${WEIR_LOG:-warn}" "$bin" run --config "$TMP/weir-$v.toml" \
        </dev/null >"$TMP/weir-$v.log" 2>&1 &
    PID[$v]=$!
    STARTED_PIDS+=("${PID[$v]}")
    wait_ready "weir ($v)" "${PID[$v]}" "${PORT[$v]}"
    log "rung $v: pid ${PID[$v]} on 127.0.0.1:${PORT[$v]}: $(describe "$v")"
done

alive() { # $1 = variant
    kill -0 "${PID[$1]}" 2>/dev/null || die "rung $1 (pid ${PID[$1]}) is no longer running; its log is kept with the results"
}

# check_headers VARIANT HEADER-FILE: the module's headers where they belong.
check_headers() {
    case "$1" in
        d|e) grep -qi '^x-weir-out-2:' "$2" ||
                { cat "$2" >&2; die "rung $1: no x-weir-out-2 header (is the module loaded?)"; };;
        *)   if grep -qi '^x-weir-out-2:' "$2"; then cat "$2" >&2; die "rung $1: unexpected x-weir-out-2 header"; fi;;
    esac
}

check_hit() { # $1 = variant, $2 = size: fetch until a hit (at most 5 tries), then check it
    local v="$1" size="$2" url hdr body i out code field extra=()
    url="http://127.0.0.1:${PORT[$v]}/obj/$size"
    hdr="$TMP/headers"; body="$TMP/body"
    field="$(client_header "$v")"; [ -n "$field" ] && extra=(-H "$field")
    for i in 1 2 3 4 5; do
        if ! out="$(curl -sS -D "$hdr" -o "$body" --max-time 5 -w '%{http_code}' "${extra[@]}" "$url" 2>"$TMP/curl-error")"; then
            alive "$v"
            die "rung $v: request $i to $url failed: $(cat "$TMP/curl-error")"
        fi
        code="$out"
        [ "$code" = 200 ] || die "rung $v: $url answered $code"
        cmp -s "$body" "$TMP/www/$size" ||
            die "rung $v: the body of $url ($(wc -c <"$body") bytes) is not the origin's ($(size_bytes "$size") bytes)"
        if [ "$i" -ge 2 ] && grep -qiE '^cache-status:.*weir; *hit' "$hdr"; then
            check_headers "$v" "$hdr"
            return 0
        fi
    done
    log "rung $v: last response headers for $url:"; cat "$hdr" >&2
    die "rung $v: /obj/$size is not served from cache after 5 requests"
}

check_miss() { # $1 = variant, $2 = tag: two new URLs, both misses with the origin's body
    local v="$1" url hdr body i code field extra=()
    if [ "$v" = o ]; then return 0; fi
    hdr="$TMP/headers"; body="$TMP/body"
    field="$(client_header "$v")"; [ -n "$field" ] && extra=(-H "$field")
    for i in 1 2; do
        url="http://127.0.0.1:${PORT[$v]}/slow/check-$2-$i"
        if ! code="$(curl -sS -D "$hdr" -o "$body" --max-time 5 -w '%{http_code}' "${extra[@]}" "$url" 2>"$TMP/curl-error")"; then
            alive "$v"
            die "rung $v: $url failed: $(cat "$TMP/curl-error")"
        fi
        [ "$code" = 200 ] || die "rung $v: $url answered $code"
        grep -qiE '^cache-status:.*weir; *fwd=miss' "$hdr" ||
            { cat "$hdr" >&2; die "rung $v: $url is not a miss"; }
        cmp -s "$body" "$TMP/slow.body" || die "rung $v: the body of $url is not the origin's"
        check_headers "$v" "$hdr"
    done
}

# ---------------------------------------------------------------- runs
RUN_ID="ladder-$(date -u +%Y%m%dT%H%M%SZ)"
RAW="$OUT_DIR/$RUN_ID"
mkdir -p "$RAW"
cp "$TMP/origin.py" "$RAW/origin.py"
for v in "${VARIANT_LIST[@]}"; do cp "$TMP/weir-$v.toml" "$RAW/weir-$v.toml"; done
# Configs name this run's ports; that's fine for raw data.
{
    machine_info
    echo "python3=$(python3 --version 2>&1 | awk '{print $2}')"
    if [ "$need_normal" = 1 ]; then
        echo "weir=$("$WEIR_BIN" --version 2>/dev/null || echo unknown)"
        echo "weir_binary_built_utc=$(date -u -r "$WEIR_BIN" +%Y-%m-%dT%H:%M:%SZ)"
    fi
    if want a; then
        echo "weir_base_binary_built_utc=$(date -u -r "$WEIR_BASE_BIN" +%Y-%m-%dT%H:%M:%SZ)"
    fi
    echo "weir_commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo none)"
    echo "weir_tree_changed_files=$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null | wc -l)"
    echo "duration=$DURATION runs=$RUNS conns=$CONNS miss_conns=$MISS_CONNS sizes=${SIZE_LIST[*]} delay_ms=$DELAY_MS variants=${VARIANT_LIST[*]} order=$ORDER"
    echo "clk_tck=$CLK_TCK"
    echo "loadavg_before=$(cut -d' ' -f1-3 /proc/loadavg)"
} >"$RAW/env.txt"
warn_if_busy

TSV="$RAW/runs.tsv"
printf 'variant\ttest\trun\trequests\tduration_s\tcpu_s\treq_per_cpu_s\treq_per_s_wall\tp50_us\tp99_us\tnon2xx\tsock_connect\tsock_read\tsock_write\tsock_timeout\tload1\n' >"$TSV"

measure() { # $1 = variant, $2 = test (hit-<size> or miss), $3 = run
    local v="$1" test="$2" run="$3" url s0 s1 out stat load1 field
    local args=(-t1 --latency)
    # wrk.format in the miss script adds -H's fields too.
    field="$(client_header "$v")"; [ -n "$field" ] && args+=(-H "$field")
    if [ "$test" = miss ]; then
        check_miss "$v" "$run"
        url="http://127.0.0.1:${PORT[$v]}/"
        args+=(-c"$MISS_CONNS" -d"$DURATION" -s "$TMP/miss.lua" "$url" -- "$v-$run")
    else
        check_hit "$v" "${test#hit-}"
        url="http://127.0.0.1:${PORT[$v]}/obj/${test#hit-}"
        args+=(-c"$CONNS" -d"$DURATION" -s "$TMP/report.lua" "$url")
    fi
    load1="$(cut -d' ' -f1 /proc/loadavg)"
    out="$RAW/wrk-$v-$test-$run.txt"
    s0=$(cpu_snapshot "${PID[$v]}")
    # In the background, so that a signal stops the script (and wrk) at once.
    wrk "${args[@]}" >"$out" 2>&1 &
    WRK_PID=$!
    if ! wait "$WRK_PID"; then
        WRK_PID=""
        cat "$out" >&2
        die "wrk failed against rung $v"
    fi
    WRK_PID=""
    s1=$(cpu_snapshot "${PID[$v]}")
    alive "$v"
    stat="$(grep '^WRKSTAT ' "$out" | tail -n1)" || die "no WRKSTAT line in $out"
    awk -v v="$v" -v test="$test" -v run="$run" -v ticks="$(cpu_delta "$s0" "$s1")" -v hz="$CLK_TCK" -v load1="$load1" '
        {
            for (i = 2; i <= NF; i++) { split($i, kv, "="); x[kv[1]] = kv[2] }
            cpu = v == "o" ? 0 : ticks / hz  # the origin: its CPU is not the point
            dur = x["duration_us"] / 1e6
            rpc = cpu > 0 ? x["requests"] / cpu : 0
            printf "%s\t%s\t%s\t%d\t%.3f\t%.2f\t%.0f\t%.0f\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n",
                v, test, run, x["requests"], dur, cpu, rpc, x["requests"] / dur,
                x["p50_us"], x["p99_us"], x["status"], x["connect"], x["read"], x["write"], x["timeout"], load1
        }' <<<"$stat" >>"$TSV"
    tail -n1 "$TSV" | awk -F'\t' '{
        printf "[ladder] %s %-8s run %s: %d req, %.2f CPU-s, %.0f req/CPU-s, %.0f req/s, p50 %.2f ms, p99 %.2f ms, load %s",
            $1, $2, $3, $4, $6, $7, $8, $9 / 1000, $10 / 1000, $16
        if ($11 + $12 + $13 + $14 + $15 > 0) printf ", ERRORS non-2xx/3xx %d, socket connect %d read %d write %d timeout %d", $11, $12, $13, $14, $15
        printf "\n" }' >&2
}

TESTS=()
for s in "${SIZE_LIST[@]}"; do TESTS+=("hit-$s"); done
TESTS+=(miss)
log "rungs ${VARIANT_LIST[*]} (order: $ORDER); ${RUNS} rounds of ${DURATION} runs: hits (${SIZE_LIST[*]}, wrk -t1 -c$CONNS), misses (${DELAY_MS} ms origin, wrk -t1 -c$MISS_CONNS)"
for run in $(seq "$RUNS"); do
    mapfile -t round < <(rotated "$run" "${VARIANT_LIST[@]}")
    for test in "${TESTS[@]}"; do
        if [ "$test" = miss ] && [ "$MISS_DIRECT" = 1 ]; then measure o miss "$run"; fi
        for v in "${round[@]}"; do
            measure "$v" "$test" "$run"
        done
    done
done

echo "loadavg_after=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$RAW/env.txt"

# ---------------------------------------------------------------- table
TABLE="$RAW/results.md"
describe_all=""
for v in "${VARIANT_LIST[@]}"; do describe_all+="$v=$(describe "$v");"; done
awk -F'\t' -v order="${VARIANT_LIST[*]}" -v sizes="${SIZE_LIST[*]}" -v desc="$describe_all" -v delay="$DELAY_MS" '
    function sort(list, a,    n, i, j, t) {
        n = split(list, a, " ")
        for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] + 0 > t + 0; j--) a[j + 1] = a[j]; a[j + 1] = t }
        return n
    }
    function median(list,    a, n) {
        n = sort(list, a)
        return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    function lo(list,    a) { sort(list, a); return a[1] }
    function hi(list,    a, n) { n = sort(list, a); return a[n] }
    function ms(us) { return sprintf("%.2f ms", us / 1000) }
    function thousands(x,    s, r) {
        s = sprintf("%.0f", x); r = ""
        while (length(s) > 3) { r = "," substr(s, length(s) - 2) r; s = substr(s, 1, length(s) - 3) }
        return s r
    }
    function pct(r) { return sprintf("%+.1f%%", (r - 1) * 100) }
    NR > 1 {
        k = $1 SUBSEP $2
        rpc[k] = rpc[k] " " $7; wall[k] = wall[k] " " $8; p50[k] = p50[k] " " $9; p99[k] = p99[k] " " $10
        byrun[$1, $2, $3] = $7; if ($3 + 0 > maxrun) maxrun = $3 + 0
        n[k]++; err[$1] += $11 + $12 + $13 + $14 + $15
    }
    END {
        nv = split(order, V, " "); ns = split(sizes, S, " ")
        nd = split(desc, D, ";")
        for (i = 1; i <= nd; i++) if (D[i] != "") { split(D[i], kv, "="); what[kv[1]] = substr(D[i], 3) }
        hdr = "| rung | what |"; sep = "| --- | --- |"
        for (s = 1; s <= ns; s++) {
            hdr = hdr " " S[s] " hit req/CPU-s | vs (a) | " S[s] " req/s (wall) |"
            sep = sep " ---: | ---: | ---: |"
        }
        hdr = hdr " miss p50 | p50 − (a) | miss p99 | errors |"
        sep = sep " ---: | ---: | ---: | --- |"
        print hdr; print sep
        for (i = 1; i <= nv; i++) {
            v = V[i]; line = "| " v " | " what[v] " |"
            for (s = 1; s <= ns; s++) {
                k = v SUBSEP "hit-" S[s]; a = "a" SUBSEP "hit-" S[s]
                if (!n[k]) { line = line " n/a | | |"; continue }
                r = (n[a] && v != "a") ? pct(median(rpc[k]) / median(rpc[a])) : (v == "a" ? "" : "n/a")
                line = line " " thousands(median(rpc[k])) " | " r " | " thousands(median(wall[k])) " |"
            }
            k = v SUBSEP "miss"; a = "a" SUBSEP "miss"
            if (n[k]) {
                d = (n[a] && v != "a") ? sprintf("%+.2f ms", (median(p50[k]) - median(p50[a])) / 1000) : (v == "a" ? "" : "n/a")
                line = line " " ms(median(p50[k])) " | " d " | " ms(median(p99[k])) " |"
            } else line = line " n/a | | |"
            line = line " " (err[v] ? err[v] " (see runs.tsv)" : "none") " |"
            print line
        }

        # The spread of the runs: the range of each rung, and its per-round ratio to rung a.
        print ""
        hdr = "| rung |"; sep = "| --- |"
        for (s = 1; s <= ns; s++) { hdr = hdr " " S[s] " req/CPU-s, runs (spread) | " S[s] " vs (a), rounds 1, 2, ... |"; sep = sep " --- | --- |" }
        hdr = hdr " miss p50, runs |"; sep = sep " --- |"
        print hdr; print sep
        for (i = 1; i <= nv; i++) {
            v = V[i]; line = "| " v " |"
            for (s = 1; s <= ns; s++) {
                t = "hit-" S[s]; k = v SUBSEP t
                if (!n[k]) { line = line " | |"; continue }
                m = median(rpc[k])
                line = line " " thousands(lo(rpc[k])) "–" thousands(hi(rpc[k])) sprintf(" (%.1f%%)", m > 0 ? (hi(rpc[k]) - lo(rpc[k])) / m * 100 : 0) " |"
                cell = ""
                if (v != "a") for (r = 1; r <= maxrun; r++) if ((v, t, r) in byrun && ("a", t, r) in byrun && byrun["a", t, r] > 0)
                    cell = cell (cell == "" ? "" : ", ") pct(byrun[v, t, r] / byrun["a", t, r])
                line = line " " cell " |"
            }
            k = v SUBSEP "miss"
            line = line " " (n[k] ? sprintf("%.2f–%.2f ms", lo(p50[k]) / 1000, hi(p50[k]) / 1000) : "") " |"
            print line
        }
        k = "o" SUBSEP "miss"
        if (n[k]) printf "\nThe origin alone (no proxy), same miss load: p50 %s (runs %.2f–%.2f ms), p99 %s; errors %s.\n", ms(median(p50[k])), lo(p50[k]) / 1000, hi(p50[k]) / 1000, ms(median(p99[k])), (err["o"] ? err["o"] : "none")
    }' "$TSV" >"$TABLE"
{
    echo
    echo "Medians of $RUNS rounds; hits: wrk -t1 -c$CONNS -d$DURATION on one cached object per size;" \
        "misses: wrk -t1 -c$MISS_CONNS -d$DURATION --latency, a new URL per request, origin delay ${DELAY_MS} ms." \
        "vs (a): ratio of median req/CPU-s to rung a's, as a change. Errors: non-2xx/3xx answers and socket errors, summed over all runs." \
        "Targets: c within 1% of a, d within 2%, e within 5% on hit req/CPU-s; miss time unchanged within noise."
} >>"$TABLE"
cp "$TABLE" "$OUT_DIR/ladder-latest.md"
log "raw results in ${RAW#"$ROOT"/}"
cat "$TABLE"
