#!/usr/bin/env bash
# bench/ladder-instructions.sh: the API-cost ladder counted in instructions.
#
# What it measures
#   Instructions Weir executes per cached hit, for each rung of the ladder (see
#   bench/ladder.sh): (a) built without module support, (b) no module, (c) `empty`,
#   (d) `add-headers`, (e) `body-copy`; and, with RUNGS, the content-adaptation
#   modules: (f) `adblock` with EasyList + EasyPrivacy (Debian's
#   webext-ublock-origin-firefox), (g) `compress`, the client sending
#   `Accept-Encoding: gzip` (hits on the stored gzip variant). Weir runs under valgrind's callgrind, which
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
# Needs valgrind and python3 (installed with apt-get when missing); builds both
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
BIN="$ROOT/target/release/weir"
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
# The client: N sequential GETs on one keep-alive connection, each body read whole.
cat > "$TMP/client.py" <<'PY'
import http.client, sys
port, path, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
headers = {"Accept-Encoding": sys.argv[4]} if len(sys.argv) > 4 else {}
c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
for i in range(n):
    c.request("GET", path, headers=headers)
    r = c.getresponse(); r.read()
    if r.status != 200 or (i > 0 and "weir; hit" not in (r.getheader("cache-status") or "")):
        sys.exit(f"request {i}: status {r.status}, cache-status {r.getheader('cache-status')}")
PY
OPORT=$(pick_port); USED_PORTS+="$OPORT "
python3 "$TMP/origin.py" "$TMP/www" "$OPORT" & PIDS+=($!)
wait_ready origin "${PIDS[-1]}" "$OPORT"

# instructions RUNG SIZE N: total instructions of one Weir run serving 1 miss and N-1 hits.
instructions() {
    local rung="$1" size="$2" n="$3" bin="$BIN" module=""
    case "$rung" in
        a) bin="$BASE_BIN" ;;
        b) ;;
        c) module=empty ;;
        d) module=add-headers ;;
        e) module=body-copy ;;
        f) module=adblock ;;
        g) module=compress ;;
    esac
    local port; port=$(pick_port)
    {
        printf '[server]\nworkers = 1\n[admin]\nlisten = "off"\n[log]\naccess = "off"\n'
        printf '[[listen]]\naddr = "127.0.0.1:%s"\nmode = "reverse"\norigin = "http://127.0.0.1:%s"\n' "$port" "$OPORT"
        [ -n "$module" ] && printf '[[module]]\nname = "%s"\n' "$module"
        [ "$rung" = f ] && printf 'lists = ["%s", "%s"]\n' "$EASYLIST" "$EASYPRIVACY"
    } > "$TMP/$rung.toml"
    local out="$TMP/callgrind.$rung.$size.$n"
    WEIR_LOG=warn valgrind --tool=callgrind --callgrind-out-file="$out" \
        "$bin" run --config "$TMP/$rung.toml" 2>"$TMP/valgrind.$rung.log" &
    local pid=$!
    for _ in $(seq 300); do
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
        kill -0 "$pid" 2>/dev/null || die "weir ($rung) exited; see $TMP/valgrind.$rung.log"
        sleep 0.1
    done
    local accept=(); [ "$rung" = g ] && accept=(gzip)
    python3 "$TMP/client.py" "$port" "/$size" "$n" "${accept[@]}" || die "client failed against rung $rung"
    kill -TERM "$pid"; wait "$pid" || true
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
    esac
}
header="| rung | what |"; sep="| --- | --- |"
for size in $SIZES; do header+=" $size: instructions per hit | vs (a) |"; sep+=" ---: | ---: |"; done
echo "$header"; echo "$sep"
for rung in $RUNGS; do
    row="| $rung | $(describe "$rung") |"
    for size in $SIZES; do
        v=${PER_HIT[$rung.$size]}; a=${PER_HIT[a.$size]}
        if [ "$rung" = a ]; then row+=" $v | |"; else
            row+=" $v | $(awk -v v="$v" -v a="$a" 'BEGIN { printf "%+.2f%%", (v - a) * 100 / a }') |"
        fi
    done
    echo "$row"
done
echo
echo "User-space instructions of the Weir process per cached hit (valgrind callgrind; (I($N2) - I($N1)) / $((N2 - N1)) hits on one keep-alive connection, one worker thread)."
