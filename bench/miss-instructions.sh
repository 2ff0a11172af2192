#!/usr/bin/env bash
# bench/miss-instructions.sh: instructions Weir executes per cache miss.
#
# What it measures
#   User-space instructions of the Weir process per miss: every request is a URL never
#   asked before, fetched from the origin over a keep-alive connection and stored.
#   Weir runs under valgrind's callgrind, which counts instructions rather than time,
#   so the counts repeat whatever else the shared machine does (see
#   bench/ladder-instructions.sh, which does the same for hits). Weir runs twice, with
#   N1 and N2 misses on one keep-alive client connection; the cost of one miss is
#   (I(N2) - I(N1)) / (N2 - N1), so start-up and shutdown cancel out. The memory tier
#   is MEMORY (1 MiB by default, about 400 objects of SIZE 1k), so that both runs are
#   past the point where the tier is full and every miss also evicts an object (the
#   steady churn of bench/miss.sh); MEMORY=1GiB measures a tier that is still filling.
#   The kernel's share (syscalls, TCP) is not counted.
#
# How to run
#   bench/miss-instructions.sh
#   N1=1000 N2=3000 SIZE=1k MEMORY=1MiB BUILD=0 bench/miss-instructions.sh
#   TOP=30 bench/miss-instructions.sh   # also the functions that cost most (inclusive),
#                                       # from callgrind_annotate of the N2 run
#   KEEP=dir bench/miss-instructions.sh # keeps both callgrind files in dir
#   PROXY=haproxy bench/miss-instructions.sh
#                                       # the same misses through HAProxy's cache
#                                       # (one thread, `total-max-size` MEMORY in MiB,
#                                       # `http-reuse always`), counted the same way;
#                                       # Debian's haproxy, installed when missing
#   CACHE_SIM=1 MEMORY=4MiB N1=3000 N2=5000 bench/miss-instructions.sh
#                                       # also first-level cache misses per miss, from
#                                       # callgrind's cache simulator with this
#                                       # machine's per-core sizes (32 KiB
#                                       # instructions, 48 KiB data, a 2 MiB second
#                                       # level); a memory tier larger than that level,
#                                       # and runs long enough to fill it
#   UNCACHEABLE=1 bench/miss-instructions.sh
#                                       # the origin answers `Cache-Control: no-store`:
#                                       # misses that pass through, not stored
#   SPLIT=1 bench/miss-instructions.sh  # the origin writes each response's head and
#                                       # body with two writes (Python's http.server
#                                       # does), so they may reach Weir apart; by
#                                       # default it writes them with one, as the nginx
#                                       # origin of bench/miss.sh does (one writev)
# CALLGRIND_OPTS adds options to callgrind's (for example --dump-instr=yes).
# Needs valgrind and python3 (valgrind installed with apt-get when missing); builds
# the release binary unless BUILD=0.
set -euo pipefail
BENCH_TAG=miss-instr
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"

N1="${N1:-1000}"
N2="${N2:-3000}"
SIZE="${SIZE:-1k}"
MEMORY="${MEMORY:-1MiB}"
BUILD="${BUILD:-1}"
TOP="${TOP:-0}"
KEEP="${KEEP:-}"
BIN="${WEIR_BIN:-$ROOT/target/release/weir}"
PROXY="${PROXY:-weir}"
case "$PROXY" in weir|haproxy) ;; *) die "PROXY must be weir or haproxy, not $PROXY" ;; esac

[[ "$N1" =~ ^[0-9]+$ && "$N2" =~ ^[0-9]+$ && "$N2" -gt "$N1" ]] || die "N1 and N2 must be integers, N2 > N1"
command -v valgrind >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind; }
if [ "$PROXY" = haproxy ]; then
    command -v haproxy >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq haproxy; }
    BIN="$(command -v haproxy)"
    # HAProxy's cache takes whole megabytes.
    mem="${MEMORY%iB}"; mem="${mem%B}"
    MEMORY_MB=$(( ($(size_bytes "$mem") + (1 << 20) - 1) >> 20 ))
elif [ "$BUILD" = 1 ]; then
    (cd "$ROOT" && cargo build --release -p weir) >&2
fi
[ -x "$BIN" ] || die "no binary at $BIN"

TMP="$(mktemp -d -t weir-miss-instr.XXXXXX)"
PIDS=()
cleanup() {
    for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
    rm -rf "$TMP"
}
trap cleanup EXIT

# The origin answers any path with SIZE bytes that the proxy may cache (or, with
# UNCACHEABLE=1, may not), head and body in one write unless SPLIT=1.
cat > "$TMP/origin.py" <<'PY'
import http.server, sys
body = b"x" * int(sys.argv[2])
cache_control = sys.argv[3]
split = sys.argv[4] == "1"
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        fields = [("Server", self.version_string()), ("Date", self.date_time_string()),
                  ("Content-Length", str(len(body))), ("Cache-Control", cache_control),
                  ("Content-Type", "text/plain")]
        if split:
            self.send_response_only(200)
            for name, value in fields:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)
        else:
            head = "HTTP/1.1 200 OK\r\n" + "".join("%s: %s\r\n" % f for f in fields)
            self.wfile.write((head + "\r\n").encode() + body)
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY
# The client: N sequential GETs of new URLs on one keep-alive connection; each must be
# a miss that was stored (with UNCACHEABLE=1: a miss).
cat > "$TMP/client.py" <<'PY'
import http.client, sys
port, tag, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
stored = "" if len(sys.argv) > 4 and sys.argv[4] == "1" else "stored"
c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
for i in range(n):
    c.request("GET", f"/{tag}/{i}")
    r = c.getresponse(); r.read()
    status = r.getheader("cache-status") or r.getheader("x-cache-status") or ""
    if r.status != 200 or not ("fwd=miss" in status and stored in status or status == "MISS"):
        sys.exit(f"request {i}: status {r.status}, cache-status {status}")
PY
OPORT=$(pick_port); USED_PORTS+="$OPORT "
CACHE_CONTROL="max-age=3600"
[ "${UNCACHEABLE:-0}" = 1 ] && CACHE_CONTROL="no-store"
python3 "$TMP/origin.py" "$OPORT" "$(size_bytes "$SIZE")" "$CACHE_CONTROL" "${SPLIT:-0}" & PIDS+=($!)
wait_ready origin "${PIDS[-1]}" "$OPORT"

OPTS="${CALLGRIND_OPTS:-}"
if [ "${CACHE_SIM:-0}" = 1 ]; then
    OPTS+=" --cache-sim=yes --I1=32768,8,64 --D1=49152,12,64 --LL=2097152,16,64"
fi

# instructions N: total instructions of one Weir run serving N misses.
instructions() {
    local n="$1" port; port=$(pick_port)
    local out="$TMP/callgrind.$n"
    if [ "$PROXY" = haproxy ]; then
        printf 'global\n    nbthread 1\n    pidfile %s\ndefaults\n    mode http\n    timeout connect 5s\n    timeout client 60s\n    timeout server 60s\n    option http-keep-alive\ncache misses\n    total-max-size %s\n    max-object-size 262144\n    max-age 86400\nfrontend misses\n    bind 127.0.0.1:%s\n    default_backend origin\nbackend origin\n    http-reuse always\n    http-request cache-use misses\n    http-response cache-store misses\n    http-after-response set-header X-Cache-Status HIT if { res.cache_hit }\n    http-after-response set-header X-Cache-Status MISS unless { res.cache_hit }\n    server o1 127.0.0.1:%s\n' \
            "$TMP/haproxy.pid" "$MEMORY_MB" "$port" "$OPORT" > "$TMP/haproxy.cfg"
        # shellcheck disable=SC2086 # a list of options
        valgrind --tool=callgrind --callgrind-out-file="$out" $OPTS \
            "$BIN" -db -f "$TMP/haproxy.cfg" </dev/null 2>"$TMP/valgrind.$n.log" >&2 &
    else
        printf '[server]\nworkers = 1\n[admin]\nlisten = "off"\n[log]\naccess = "off"\n[cache]\nmemory = "%s"\nmax_object = "1MiB"\ndisk = "off"\n[[listen]]\naddr = "127.0.0.1:%s"\nmode = "reverse"\norigin = "http://127.0.0.1:%s"\n' \
            "$MEMORY" "$port" "$OPORT" > "$TMP/weir.toml"
        # shellcheck disable=SC2086 # a list of options
        WEIR_LOG=warn valgrind --tool=callgrind --callgrind-out-file="$out" $OPTS \
            "$BIN" run --config "$TMP/weir.toml" 2>"$TMP/valgrind.$n.log" &
    fi
    local pid=$!
    for _ in $(seq 300); do
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
        kill -0 "$pid" 2>/dev/null || die "$PROXY exited: $(tail -n 5 "$TMP/valgrind.$n.log")"
        sleep 0.1
    done
    python3 "$TMP/client.py" "$port" "run$n" "$n" "${UNCACHEABLE:-0}" || die "client failed"
    kill -TERM "$pid"; wait "$pid" || true
    grep -m1 '^summary:\|^totals:' "$out" | awk '{print $2}'
}

i1=$(instructions "$N1")
i2=$(instructions "$N2")
per=$(( (i2 - i1) / (N2 - N1) ))
log "$N1 misses: $i1 instructions; $N2 misses: $i2"
if [ "${CACHE_SIM:-0}" = 1 ]; then
    # events: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw, per miss.
    paste <(grep -m1 '^summary:' "$TMP/callgrind.$N1") <(grep -m1 '^summary:' "$TMP/callgrind.$N2") |
        awk -v n="$((N2 - N1))" -v who="$PROXY" '{ k = (NF - 2) / 2; split("Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw", e, " ");
            for (i = 2; i <= k + 1; i++) printf "%s %.1f  ", e[i - 1], ($(i + k + 1) - $i) / n; printf "per miss (%s)\n", who }'
fi
if [ -n "$KEEP" ]; then mkdir -p "$KEEP" && cp "$TMP/callgrind.$N1" "$TMP/callgrind.$N2" "$KEEP/"; fi
if [ "$TOP" -gt 0 ]; then
    callgrind_annotate --inclusive=yes "$TMP/callgrind.$N2" 2>/dev/null | head -n "$((TOP + 25))" >&2 || true
fi
echo "$per instructions per miss ($PROXY, $SIZE objects, memory tier $MEMORY; (I($N2) - I($N1)) / $((N2 - N1)), one worker thread, one keep-alive client connection)"
