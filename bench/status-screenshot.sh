#!/usr/bin/env bash
# bench/status-screenshot.sh: the status page's picture in the docs
# (docs/images/status-page.png), taken by headless Chromium while traffic flows.
#
# What it does
#   Starts an origin (python3), a release Weir in reverse mode in front of it with the
#   `clients`, `add-headers` and `access` modules (so the busiest clients and the
#   modules table have rows), sends a few requests a second from three loops (misses
#   now and then, hits mostly, a few denied), and after WAIT seconds (default 20) takes
#   the screenshot of `http://ADMIN/` at 1280 × 1180.
#
# How to run
#   bench/status-screenshot.sh                    # writes docs/images/status-page.png
#   OUT=/tmp/status.png WAIT=30 bench/status-screenshot.sh
# Needs chromium, curl and python3 (installed with apt-get when missing); builds Weir
# unless BUILD=0.
set -euo pipefail
BENCH_TAG=status-screenshot
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"

OUT="${OUT:-$ROOT/docs/images/status-page.png}"
WAIT="${WAIT:-20}"
BUILD="${BUILD:-1}"
BIN="${BIN:-$ROOT/target/release/weir}"

for tool in chromium curl python3; do
    command -v "$tool" >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$tool"; }
done
[ "$BUILD" = 1 ] && (cd "$ROOT" && cargo build --release -p weir) >&2

TMP="$(mktemp -d -t weir-status-shot.XXXXXX)"
PIDS=()
cleanup() {
    for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
    rm -rf "$TMP"
}
trap cleanup EXIT

cat > "$TMP/origin.py" <<'PY'
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        body = b"x" * (2000 + 300 * (hash(self.path) % 40))
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "max-age=30")
        self.end_headers()
        self.wfile.write(body)
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY
OPORT=$(pick_port); USED_PORTS+="$OPORT "
python3 "$TMP/origin.py" "$OPORT" & PIDS+=($!)
wait_ready origin "${PIDS[-1]}" "$OPORT"

PORT=$(pick_port); USED_PORTS+="$PORT "
ADMIN=$(pick_port); USED_PORTS+="$ADMIN "
cat > "$TMP/weir.toml" <<TOML
[admin]
listen = "127.0.0.1:$ADMIN"
[log]
access = "off"
[[listen]]
addr = "127.0.0.1:$PORT"
mode = "reverse"
origin = "http://127.0.0.1:$OPORT"
[[module]]
name = "clients"
[[module]]
name = "add-headers"
[[module]]
name = "access"
[[module.rule]]
action = "deny"
url_regex = '/private/'
[[module.rule]]
action = "allow"
TOML
WEIR_LOG=warn "$BIN" run --config "$TMP/weir.toml" 2>"$TMP/weir.log" & PIDS+=($!)
wait_ready weir "${PIDS[-1]}" "$PORT"

# Three clients' worth of traffic: mostly hits on a few objects, new objects now and
# then, an occasional denied path.
traffic() {
    local i=0
    while true; do
        curl -s -o /dev/null "http://127.0.0.1:$PORT/$1/$((i % $2))" || true
        [ $((i % 17)) = 0 ] && curl -s -o /dev/null "http://127.0.0.1:$PORT/private/$i" || true
        i=$((i + 1))
        sleep "$3"
    done
}
traffic a 20 0.02 & PIDS+=($!)
traffic b 200 0.05 & PIDS+=($!)
traffic c 5 0.1 & PIDS+=($!)
log "traffic flowing; waiting ${WAIT}s for the charts to fill"
sleep "$WAIT"
chromium --headless --no-sandbox --disable-gpu --no-first-run --hide-scrollbars \
    --user-data-dir="$TMP/profile" --window-size=1280,1180 --virtual-time-budget=3000 \
    --screenshot="$OUT" "http://127.0.0.1:$ADMIN/" 2>"$TMP/chromium.log" ||
    die "chromium failed: $(tail -5 "$TMP/chromium.log")"
log "wrote $OUT"
