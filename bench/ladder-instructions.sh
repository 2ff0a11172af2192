#!/usr/bin/env bash
# bench/ladder-instructions.sh: the API-cost ladder counted in instructions.
#
# What it measures
#   Instructions Weir executes per cached hit, for each rung of the ladder (see
#   bench/ladder.sh): (a) built without module support, (b) no module, (c) `empty`,
#   (d) `add-headers`, (e) `body-copy`; and, with RUNGS, the content-adaptation
#   modules: (f) `adblock` with EasyList + EasyPrivacy (Debian's
#   webext-ublock-origin-firefox), (g) `compress`, the client sending
#   `Accept-Encoding: gzip` (hits on the stored gzip variant); and (h) `access` with 20
#   rules of every kind (networks, users and groups, domains, host and URL patterns,
#   methods, ports, schemes, times, days), the last of which allows the request, and
#   Basic authentication against an htpasswd file with one bcrypt user: the client
#   sends `Authorization` (the listener is a reverse one) on every request, so every
#   hit but the first finds its credentials already checked (issue 19's rung, compared
#   with (b)); (i) `wasm` with an empty proxy-wasm filter (every HTTP callback returns
#   at once) and (j) `wasm` with a filter that adds one response header (issue 16's
#   rungs, compared with (b); bench/wasm/*.wat, compiled with wat2wasm from Debian's
#   wabt); and (k), rung (b) again with the client sending one more field as long as
#   (h)'s `Authorization` line, as `User-Agent` (a standard name, parsed like
#   `Authorization`, that a hit does not look at): (b) without the module parses a
#   shorter request than (h), and h - k leaves that parsing out. Not `Authorization`
#   itself: without the module, a shared cache must not answer a request carrying
#   credentials from storage (RFC 9111, 3.5), so (k) would have no hits; and (l),
#   rung (b) with an HTTP/2 client (h2load, h2c by prior knowledge, one connection,
#   one request at a time; nghttp2-client). Weir runs
#   under valgrind's callgrind, which
#   counts instructions rather than time: the counts repeat whatever else the
#   machine does, so differences of a fraction of a percent are visible, which
#   wall-clock sampling on a shared 2-core machine cannot show. Each rung runs twice,
#   with N1 and N2 hits on one keep-alive connection; the cost of one hit is
#   (I(N2) - I(N1)) / (N2 - N1), so start-up and shutdown cancel out. The kernel's
#   share (syscalls, TCP) is not counted: it is the same for every rung.
#
# How to run
#   bench/ladder-instructions.sh                 # 1k and 16k objects
#   N1=200 N2=1200 SIZES=1k bench/ladder-instructions.sh
#   RUNGS="a b f g" SIZES=8k bench/ladder-instructions.sh   # the adaptation modules
#   RUNGS="a b h" bench/ladder-instructions.sh              # access rules and authentication
#   RUNGS="b k h" bench/ladder-instructions.sh              # ... and the same requests without them
#   RUNGS="b i j" bench/ladder-instructions.sh              # proxy-wasm filters
# PIPELINE=K sends the hits K at a time on the connection without waiting for the
# answers (the first request, the miss, alone): Weir then never waits for a request,
# so the wake-ups of an idle worker (a few thousand instructions each, which come and
# go with timing and make one-at-a-time counts drift by a few hundred per hit) drop
# out. The counts are lower than one at a time; compare rungs of the same setting.
# PROFILES=DIR keeps callgrind's output of each run there (callgrind.RUNG.SIZE.N),
# to read with callgrind_annotate.
# CALLGRIND_OPTS adds options to callgrind's (for example --dump-instr=yes, to read
# the costs instruction by instruction).
# BIN=path/to/weir counts another build of the normal binary (with BUILD=0), for
# example one kept from before a change.
# Needs valgrind and python3 (installed with apt-get when missing; rung h also
# htpasswd from apache2-utils, to hash its user's password); builds both
# binaries unless BUILD=0.
set -euo pipefail
BENCH_TAG=ladder-instr
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"

N1="${N1:-500}"
RUNGS="${RUNGS:-a b c d e}"
N2="${N2:-2500}"
SIZES="${SIZES:-1k 16k}"
BUILD="${BUILD:-1}"
BIN="${BIN:-$ROOT/target/release/weir}"
BASE_BIN="$ROOT/target/ladder-base/release/weir"

command -v valgrind >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind; }
if [ "$BUILD" = 1 ]; then
    (cd "$ROOT" && cargo build --release -p weir) >&2
    (cd "$ROOT" && CARGO_TARGET_DIR="$ROOT/target/ladder-base" cargo build --release -p weir --no-default-features) >&2
fi

TMP="$(mktemp -d -t weir-ladder-instr.XXXXXX)"
PIDS=()
cleanup() {
    for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
    rm -rf "$TMP"
}
trap cleanup EXIT

# The origin: files of each size with Cache-Control, so the proxy caches them.
mkdir -p "$TMP/www"
for s in $SIZES; do head -c "$(size_bytes "$s")" /dev/zero | tr '\0' x > "$TMP/www/$s"; done
if [[ " $RUNGS " == *" f "* ]]; then
    dpkg -s webext-ublock-origin-firefox >/dev/null 2>&1 ||
        { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq webext-ublock-origin-firefox; }
    EASYLIST="$(dpkg -L webext-ublock-origin-firefox | grep -m1 '/easylist.txt$')"
    EASYPRIVACY="$(dpkg -L webext-ublock-origin-firefox | grep -m1 '/easyprivacy.txt$')"
fi
if [[ " $RUNGS " == *" h "* ]]; then
    command -v htpasswd >/dev/null ||
        { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq apache2-utils; }
    # Cost 10, htpasswd's default: checked once per run, off the proxy's threads.
    htpasswd -cbB -C 10 "$TMP/users" "$ACCESS_USER" "$ACCESS_PASSWORD" 2>/dev/null
fi
if [[ " $RUNGS " == *" l "* ]]; then
    command -v h2load >/dev/null ||
        { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nghttp2-client; }
fi
if [[ " $RUNGS " == *" i "* || " $RUNGS " == *" j "* ]]; then
    command -v wat2wasm >/dev/null ||
        { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wabt; }
    wat2wasm "$ROOT/bench/wasm/empty.wat" -o "$TMP/empty.wasm"
    wat2wasm "$ROOT/bench/wasm/add-header.wat" -o "$TMP/add-header.wasm"
fi
cat > "$TMP/origin.py" <<'PY'
import http.server, sys, os
root = sys.argv[1]
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        body = open(os.path.join(root, self.path.lstrip("/")), "rb").read()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "max-age=3600")
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(body)
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[2])), H).serve_forever()
PY
# The client: N sequential GETs on one keep-alive connection, each body read whole,
# with the request headers given as further arguments ("Name: value").
cat > "$TMP/client.py" <<'PY'
import http.client, os, socket, sys
port, path, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
headers = dict(h.split(": ", 1) for h in sys.argv[4:])
batch = int(os.environ.get("PIPELINE", "0"))
def check(i, status, cache_status):
    if status != 200 or (i > 0 and "weir; hit" not in (cache_status or "")):
        sys.exit(f"request {i}: status {status}, cache-status {cache_status}")
if batch == 0:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    for i in range(n):
        c.request("GET", path, headers=headers)
        r = c.getresponse(); r.read()
        check(i, r.status, r.getheader("cache-status"))
    sys.exit(0)
# Pipelined: the first request alone (the miss), then the rest written `batch` at a
# time, so that the proxy finds the next request already read and never waits.
s = socket.create_connection(("127.0.0.1", port), timeout=30)
lines = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
one = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{lines}\r\n".encode()
buf = b""
def response(i):
    global buf
    while b"\r\n\r\n" not in buf:
        more = s.recv(65536)
        if not more:
            sys.exit(f"request {i}: connection closed")
        buf += more
    head, buf = buf.split(b"\r\n\r\n", 1)
    fields = head.decode("latin-1").split("\r\n")
    status = int(fields[0].split()[1])
    named = {f.split(":", 1)[0].lower(): f.split(":", 1)[1].strip() for f in fields[1:]}
    length = int(named.get("content-length", "0"))
    while len(buf) < length:
        buf += s.recv(65536)
    buf = buf[length:]
    check(i, status, named.get("cache-status"))
s.sendall(one)
response(0)
i = 1
while i < n:
    k = min(batch, n - i)
    s.sendall(one * k)
    for j in range(k):
        response(i + j)
    i += k
PY
OPORT=$(pick_port); USED_PORTS+="$OPORT "
python3 "$TMP/origin.py" "$TMP/www" "$OPORT" & PIDS+=($!)
wait_ready origin "${PIDS[-1]}" "$OPORT"


# instructions RUNG SIZE N: total instructions of one Weir run serving 1 miss and N-1 hits.
instructions() {
    local rung="$1" size="$2" n="$3" bin="$BIN" module=""
    case "$rung" in
        a) bin="$BASE_BIN" ;;
        b | k | l) ;;
        c) module=empty ;;
        d) module=add-headers ;;
        e) module=body-copy ;;
        f) module=adblock ;;
        g) module=compress ;;
        h) module=access ;;
        i | j) module=wasm ;;
    esac
    local port; port=$(pick_port)
    {
        printf '[server]\nworkers = 1\n[admin]\nlisten = "off"\n[log]\naccess = "off"\n'
        printf '[[listen]]\naddr = "127.0.0.1:%s"\nmode = "reverse"\norigin = "http://127.0.0.1:%s"\n' "$port" "$OPORT"
        [ -n "$module" ] && printf '[[module]]\nname = "%s"\n' "$module"
        [ "$rung" = f ] && printf 'lists = ["%s", "%s"]\n' "$EASYLIST" "$EASYPRIVACY"
        [ "$rung" = h ] && access_settings "$TMP/users"
        [ "$rung" = i ] && printf 'path = "%s"\n' "$TMP/empty.wasm"
        [ "$rung" = j ] && printf 'path = "%s"\n' "$TMP/add-header.wasm"
    } > "$TMP/$rung.toml"
    local out="$TMP/callgrind.$rung.$size.$n"
    # Its stdout away from the command substitution this runs in, which would otherwise
    # wait for it to close even after the function has failed.
    # shellcheck disable=SC2086 # CALLGRIND_OPTS is a list of options
    WEIR_LOG=warn valgrind --tool=callgrind --callgrind-out-file="$out" ${CALLGRIND_OPTS:-} \
        "$bin" run --config "$TMP/$rung.toml" >/dev/null 2>"$TMP/valgrind.$rung.log" &
    local pid=$!
    for _ in $(seq 300); do
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
        kill -0 "$pid" 2>/dev/null || die "weir ($rung) exited; see $TMP/valgrind.$rung.log"
        sleep 0.1
    done
    local headers=()
    [ "$rung" = g ] && headers=("Accept-Encoding: gzip")
    [ "$rung" = h ] && headers=("$ACCESS_CREDENTIALS")
    [ "$rung" = k ] && headers=("$LIKE_CREDENTIALS")
    if [ "$rung" = l ]; then
        # HTTP/2 by prior knowledge, one connection, one request at a time.
        if ! h2load -n "$n" -c 1 -m 1 "http://127.0.0.1:$port/$size" >"$TMP/h2load.log" 2>&1 ||
            ! grep -q "succeeded, 0 failed" "$TMP/h2load.log"; then
            kill -TERM "$pid"; wait "$pid" || true
            cat "$TMP/h2load.log" >&2
            die "h2load failed against rung l"
        fi
    elif ! python3 "$TMP/client.py" "$port" "/$size" "$n" "${headers[@]}"; then
        kill -TERM "$pid"; wait "$pid" || true
        die "client failed against rung $rung"
    fi
    kill -TERM "$pid"; wait "$pid" || true
    [ -n "${PROFILES:-}" ] && mkdir -p "$PROFILES" && cp "$out" "$PROFILES/"
    grep -m1 '^summary:\|^totals:' "$out" | awk '{print $2}'
}

declare -A PER_HIT
for size in $SIZES; do
    for rung in $RUNGS; do
        i1=$(instructions "$rung" "$size" "$N1")
        i2=$(instructions "$rung" "$size" "$N2")
        PER_HIT[$rung.$size]=$(( (i2 - i1) / (N2 - N1) ))
        log "rung $rung $size: $i1 -> $i2 instructions; ${PER_HIT[$rung.$size]} per hit"
    done
done

describe() {
    case "$1" in
        a) echo "built without module support" ;;
        b) echo "normal build, no module" ;;
        c) echo "module \`empty\` (all events, no-op)" ;;
        d) echo "module \`add-headers\` (4 headers)" ;;
        e) echo "module \`body-copy\` (copy bodies + 4 headers)" ;;
        f) echo "module \`adblock\` (EasyList + EasyPrivacy)" ;;
        g) echo "module \`compress\` (hits on the gzip variant)" ;;
        h) echo "module \`access\` (20 rules, Basic credentials already checked)" ;;
        i) echo "module \`wasm\`, an empty proxy-wasm filter" ;;
        j) echo "module \`wasm\`, a filter adding one response header" ;;
        k) echo "normal build, no module, the client sending a field as long as (h)'s credentials" ;;
        l) echo "normal build, no module, an HTTP/2 client (h2c, prior knowledge)" ;;
    esac
}
percent() { awk -v v="$1" -v a="$2" 'BEGIN { printf "%+.2f%%", (v - a) * 100 / a }'; }
header="| rung | what |"; sep="| --- | --- |"
for size in $SIZES; do header+=" $size: instructions per hit | vs (a) |"; sep+=" ---: | ---: |"; done
echo "$header"; echo "$sep"
for rung in $RUNGS; do
    row="| $rung | $(describe "$rung") |"
    for size in $SIZES; do
        v=${PER_HIT[$rung.$size]}; a=${PER_HIT[a.$size]:-}
        if [ "$rung" = a ] || [ -z "$a" ]; then row+=" $v | |"; else
            row+=" $v | $(percent "$v" "$a") |"
        fi
    done
    echo "$row"
done
echo
# Issue 19 states rung h's target against the normal build without a module.
if [[ " $RUNGS " == *" h "* && " $RUNGS " == *" b "* ]]; then
    for size in $SIZES; do
        echo "h vs b, $size: $(percent "${PER_HIT[h.$size]}" "${PER_HIT[b.$size]}") ($(printf %+d $((PER_HIT[h.$size] - PER_HIT[b.$size]))) instructions per hit)"
    done
    echo
fi
# Requests of the same length with and without the module.
if [[ " $RUNGS " == *" h "* && " $RUNGS " == *" k "* ]]; then
    for size in $SIZES; do
        echo "h vs k, $size: $(percent "${PER_HIT[h.$size]}" "${PER_HIT[k.$size]}") ($(printf %+d $((PER_HIT[h.$size] - PER_HIT[k.$size]))) instructions per hit)"
    done
    echo
fi
echo "User-space instructions of the Weir process per cached hit (valgrind callgrind; (I($N2) - I($N1)) / $((N2 - N1)) hits on one keep-alive connection, one worker thread)."
