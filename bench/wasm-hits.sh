#!/usr/bin/env bash
# bench/wasm-hits.sh: cached hits per CPU-second with proxy-wasm filters, side by side.
#
# What it measures
#   One Weir per rung, all running at once on one origin: (b) no module, (b2) the
#   same again (the noise floor: b2 / b should be 1), (c) the `empty` module on every
#   event, (i) the empty proxy-wasm filter and (j) the filter adding a header
#   (bench/wasm/*.wat, as in bench/ladder-instructions.sh). Each round loads each
#   rung in turn with `wrk -t1 -cCONNS -dDURATION` on a 1 KB hit and reads the Weir
#   process's CPU time (utime + stime in /proc) before and after: requests per
#   CPU-second. Reported: every round, and each rung's median and its median ratio
#   to (b) over the rounds. The instruction counts of ladder-instructions.sh run one
#   connection; this shows what many connections at once cost, which the counts
#   cannot (caches shared by many transactions in flight).
#
# How to run
#   bench/wasm-hits.sh                        # 5 rounds of 10 s, 64 connections
#   CONNS=2 ROUNDS=4 RUNGS="b i b2" bench/wasm-hits.sh
# Needs wrk, curl, python3 and wat2wasm (installed with apt-get when missing);
# builds Weir unless BUILD=0 (WEIR_BIN picks another build). Loopback only; what it
# starts is stopped on exit.
set -euo pipefail
BENCH_TAG=wasm-hits
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"

ROUNDS="${ROUNDS:-5}"
DURATION="${DURATION:-10s}"
CONNS="${CONNS:-64}"
RUNGS="${RUNGS:-b i b2 j c}"
BUILD="${BUILD:-1}"
WEIR_BIN="${WEIR_BIN:-$ROOT/target/release/weir}"

ensure_tools wrk:wrk curl:curl python3:python3 wat2wasm:wabt
[ "$BUILD" = 1 ] && (cd "$ROOT" && cargo build --release -p weir) >&2
STARTED_PIDS=()
TMP="$(mktemp -d -t weir-wasm-hits.XXXXXX)"
trap bench_cleanup EXIT INT TERM

head -c 1024 /dev/zero | tr '\0' x > "$TMP/1k"
wat2wasm "$ROOT/bench/wasm/empty.wat" -o "$TMP/empty.wasm"
wat2wasm "$ROOT/bench/wasm/add-header.wat" -o "$TMP/add-header.wasm"
cat > "$TMP/origin.py" <<'PY'
import http.server, sys
body = open(sys.argv[1], "rb").read()
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "max-age=3600")
        self.end_headers()
        self.wfile.write(body)
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[2])), H).serve_forever()
PY
OPORT=$(pick_port); USED_PORTS+="$OPORT "
python3 "$TMP/origin.py" "$TMP/1k" "$OPORT" & STARTED_PIDS+=($!)
wait_ready origin "${STARTED_PIDS[-1]}" "$OPORT"

declare -A PID PORT
for rung in $RUNGS; do
    port=$(pick_port); USED_PORTS+="$port "; PORT[$rung]=$port
    {
        printf '[admin]\nlisten = "off"\n[log]\naccess = "off"\n'
        printf '[[listen]]\naddr = "127.0.0.1:%s"\nmode = "reverse"\norigin = "http://127.0.0.1:%s"\n' "$port" "$OPORT"
        case "$rung" in
            b | b2) ;;
            c) printf '[[module]]\nname = "empty"\n' ;;
            i) printf '[[module]]\nname = "wasm"\npath = "%s"\n' "$TMP/empty.wasm" ;;
            j) printf '[[module]]\nname = "wasm"\npath = "%s"\n' "$TMP/add-header.wasm" ;;
            *) die "unknown rung $rung (b, b2, c, i, j)" ;;
        esac
    } > "$TMP/$rung.toml"
    WEIR_LOG=warn "$WEIR_BIN" run --config "$TMP/$rung.toml" >"$TMP/$rung.log" 2>&1 &
    PID[$rung]=$!; STARTED_PIDS+=($!)
    wait_ready "weir ($rung)" "${PID[$rung]}" "$port"
    url="http://127.0.0.1:$port/1k"
    curl -s -o /dev/null "$url"
    curl -si "$url" | grep -qi '^cache-status: weir; hit' || die "rung $rung: not a hit"
done

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
declare -A RATES
echo "| round | rung | requests | CPU seconds | requests per CPU-second |"
echo "| ---: | --- | ---: | ---: | ---: |"
for round in $(seq "$ROUNDS"); do
    for rung in $RUNGS; do
        t0=$(cpu_ticks "${PID[$rung]}")
        n=$(wrk -t1 -c"$CONNS" -d"$DURATION" "http://127.0.0.1:${PORT[$rung]}/1k" |
            awk '/requests in/ { print $1 }')
        t1=$(cpu_ticks "${PID[$rung]}")
        ticks=$(( t1 - t0 ))
        rate=$(( n * $(getconf CLK_TCK) / ticks ))
        RATES[$rung]+="$rate "
        echo "| $round | $rung | $n | $(awk -v t="$ticks" -v h="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", t / h }') | $rate |"
    done
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo
echo "| rung | median requests per CPU-second | median of the rounds' ratios to (b) |"
echo "| --- | ---: | ---: |"
for rung in $RUNGS; do
    read -r -a mine <<< "${RATES[$rung]}"
    read -r -a base <<< "${RATES[b]:-}"
    ratios=""
    for k in "${!mine[@]}"; do
        [ -n "${base[$k]:-}" ] && ratios+="$(awk -v a="${mine[$k]}" -v b="${base[$k]}" 'BEGIN { printf "%.3f", a / b }') "
    done
    echo "| $rung | $(echo "${RATES[$rung]}" | median) | $(echo "$ratios" | median) |"
done
