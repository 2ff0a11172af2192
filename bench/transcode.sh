#!/usr/bin/env bash
# bench/transcode.sh: the image transcoder, against the paper's module table.
#
# What it measures
#   1. Transcodes per CPU-second (so per core, whatever else runs on the machine):
#      crates/weir-modules/examples/transcode_bench.rs, one thread, on about 8 KB JPEG
#      photographs (real photographs from Debian's python3-skimage
#      package, fetched with `apt-get download` and unpacked here, never installed),
#      to JPEG and to WebP at quality 60, RUNS times; medians.
#   2. What transcoding at full demand does to the proxy's other traffic. One origin
#      (python3's http.server, keep-alive) serves the photographs and an 8 KB hot object; two Weirs
#      with `transcode` (2 helpers) differ only in the helpers' priority:
#        nice0    nice = 0, sched_idle = false
#        nice19   nice = 19, sched_idle = true (the default)
#      Each round measures, DURATION each:
#        baseline  hits only, on nice19's Weir, no transcoding
#        nice0     hits, while wrk asks nice0's Weir for photographs at new URLs
#                  (every request a miss and a transcode) on CONNS connections
#        nice19    the same on nice19's Weir
#      Hits: h2load over HTTP/1.1, RATE requests per second in all (open loop, fixed
#      rate), on the hot object; its mean and max request time. Misses: wrk's p50 and
#      p99, and transcodes per second (the module's counter). The origin and wrk run at
#      nice 19, standing in for machines of their own (on this 2-core machine they
#      would otherwise take CPU from the proxy and the hits whatever the helpers do).
#
# How to run
#   bench/transcode.sh                          # 3 rounds of 10 s
#   DURATION=5 RUNS=1 bench/transcode.sh        # a quick look
#
# Output: Markdown tables on stdout. All traffic stays on 127.0.0.1; everything
# started here is stopped on exit.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BENCH_TAG=transcode
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

DURATION="${DURATION:-10}"
RUNS="${RUNS:-3}"
CONNS="${CONNS:-8}"
RATE="${RATE:-1000}"
HIT_CLIENTS=4
BUILD="${BUILD:-1}"
WEIR_BIN="${WEIR_BIN:-$ROOT/target/release/weir}"
EXAMPLE_BIN="${EXAMPLE_BIN:-$ROOT/target/release/examples/transcode_bench}"
PHOTO_CACHE="${PHOTO_CACHE:-$ROOT/bench/out/photos}"
KEEP_TMP="${KEEP_TMP:-0}"
PHOTOS=(astronaut.png chelsea.png coffee.png rocket.jpg motorcycle_left.png motorcycle_right.png)

ensure_tools wrk h2load:nghttp2-client curl python3

# Real photographs: scikit-image's sample data, from Debian's package (unpacked only).
if [ ! -f "$PHOTO_CACHE/${PHOTOS[0]}" ]; then
    log "fetching python3-skimage (its sample photographs)"
    mkdir -p "$PHOTO_CACHE/deb"
    (cd "$PHOTO_CACHE/deb" && apt-get download python3-skimage >&2) || die "apt-get download python3-skimage failed"
    dpkg-deb -x "$PHOTO_CACHE"/deb/python3-skimage_*.deb "$PHOTO_CACHE/deb/root"
    for p in "${PHOTOS[@]}"; do
        cp "$(find "$PHOTO_CACHE/deb/root" -path "*/skimage/data/$p" | head -n1)" "$PHOTO_CACHE/$p"
    done
    rm -rf "$PHOTO_CACHE/deb"
fi

if [ "$BUILD" = 1 ]; then
    log "building (cargo build --release -p weir -p weir-modules --example transcode_bench)"
    (cd "$ROOT" && cargo build --release -p weir -p weir-modules --example transcode_bench) >&2 ||
        die "cargo build failed"
fi
[ -x "$WEIR_BIN" ] || die "no Weir binary at $WEIR_BIN"
[ -x "$EXAMPLE_BIN" ] || die "no transcode_bench at $EXAMPLE_BIN"

TMP="$(mktemp -d "${TMPDIR:-/tmp}/weir-transcode.XXXXXX")"
STARTED_PIDS=()
WRK_PID=""
SAVE_LOGS=""
OUT_DIR="${OUT_DIR:-$ROOT/bench/out}"
trap bench_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
warn_if_busy

median() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
photo_paths=()
for p in "${PHOTOS[@]}"; do photo_paths+=("$PHOTO_CACHE/$p"); done

# 1. Transcodes per second per core.
declare -A RATE_OF
for round in $(seq "$RUNS"); do
    out="$(OUT="$TMP/www" SECONDS_PER_MODE="$DURATION" "$EXAMPLE_BIN" "${photo_paths[@]}")"
    [ "$round" = 1 ] && grep -v '^|' <<<"$out" | grep . >&2
    for mode in JPEG WebP; do
        r="$(awk -F'|' -v m=" $mode " '$2 == m { gsub(/ /, "", $4); print $4 }' <<<"$out")"
        RATE_OF[$mode]+="$r "
        log "round $round: $mode $r transcodes/s"
    done
done
echo "### Transcodes per CPU-second, one thread (median of $RUNS)"
echo
echo "| Output | Transcodes per CPU-second | Runs |"
echo "|---|---:|---|"
for mode in JPEG WebP; do echo "| $mode | $(median "${RATE_OF[$mode]}") | ${RATE_OF[$mode]}|"; done
echo

# 2. Hits at a fixed rate while transcoding at full demand.
head -c 8192 /dev/urandom | base64 -w 100 | head -c 8192 >"$TMP/www/hot.txt"
touch -d '1 day ago' "$TMP/www"/*
PORT_ORIGIN=$(pick_port); USED_PORTS=" $PORT_ORIGIN "
# http.server with keep-alive and a listen backlog that a burst of misses does not
# overflow (its default of 5 turns some misses into 1 s SYN retransmissions).
cat >"$TMP/origin.py" <<'PY'
import functools, http.server, sys
class Server(http.server.ThreadingHTTPServer):
    request_queue_size = 1024
class Handler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # head and body are two writes: no 40 ms delayed-ACK stall
    def log_message(self, *args):
        pass
Server(("127.0.0.1", int(sys.argv[1])), functools.partial(Handler, directory=sys.argv[2])).serve_forever()
PY
# The origin and the miss load stand in for machines of their own: at nice 19 they take
# no CPU from the proxy and the hit load, so what the hits feel is the helpers.
nice -n 19 python3 "$TMP/origin.py" "$PORT_ORIGIN" "$TMP/www" >"$TMP/origin.log" 2>&1 &
STARTED_PIDS+=("$!")
wait_ready origin "$!" "$PORT_ORIGIN"

declare -A PORT ADMIN PID
for v in nice0 nice19; do
    PORT[$v]=$(pick_port); USED_PORTS+="${PORT[$v]} "
    ADMIN[$v]=$(pick_port); USED_PORTS+="${ADMIN[$v]} "
    if [ "$v" = nice0 ]; then prio='nice = 0\nsched_idle = false'; else prio='nice = 19\nsched_idle = true'; fi
    {
        printf '[admin]\nlisten = "127.0.0.1:%s"\n\n[log]\naccess = "off"\n\n[cache]\ndisk = "off"\n\n' "${ADMIN[$v]}"
        printf '[[listen]]\naddr = "127.0.0.1:%s"\nmode = "reverse"\norigin = "http://127.0.0.1:%s"\n\n' "${PORT[$v]}" "$PORT_ORIGIN"
        printf '[[module]]\nname = "transcode"\nhelpers = 2\nqueue = 64\njob_timeout = "5s"\n'"$prio"'\n'
    } >"$TMP/weir-$v.toml"
    WEIR_LOG=warn "$WEIR_BIN" run --config "$TMP/weir-$v.toml" </dev/null >"$TMP/weir-$v.log" 2>&1 &
    PID[$v]=$!
    STARTED_PIDS+=("${PID[$v]}")
    wait_ready "weir ($v)" "${PID[$v]}" "${PORT[$v]}"
    url="http://127.0.0.1:${PORT[$v]}"
    for _ in 1 2; do curl -sS -o /dev/null "$url/hot.txt"; done
    curl -sS -D "$TMP/h" -o /dev/null "$url/hot.txt"
    grep -qiE '^cache-status:.*weir; *hit' "$TMP/h" || { cat "$TMP/h" >&2; die "$v: hot.txt is not a hit"; }
    curl -sS -o "$TMP/check.jpg" "$url/photo0.jpg?warm"
    [ "$(stat -c %s "$TMP/check.jpg")" -lt "$(stat -c %s "$TMP/www/photo0.jpg")" ] || die "$v: photo0.jpg was not transcoded"
done

n_photos="$(ls "$TMP/www"/photo*.jpg | wc -l)"
cat >"$TMP/misses.lua" <<LUA
n = 0
request = function()
  n = n + 1
  return wrk.format("GET", "/photo" .. (n % $n_photos) .. ".jpg?u=" .. math.random(1, 1e9) .. "-" .. n)
end
LUA
wrk_report_lua >>"$TMP/misses.lua"

transcodes() {
    curl -sS "http://127.0.0.1:${ADMIN[$1]}/metrics" |
        awk '$1 == "weir_module_transcode_done_total" { print $2 }'
}
# hits PORT: h2load's mean and max request time in ms, at RATE requests/s.
hits() {
    local out
    out="$(h2load --h1 -c "$HIT_CLIENTS" --rps "$(( RATE / HIT_CLIENTS ))" -D "$DURATION" "http://127.0.0.1:$1/hot.txt" 2>&1)"
    grep -q '^status codes: .* 0 3xx, 0 4xx, 0 5xx' <<<"$out" || { echo "$out" >&2; die "hits failed"; }
    # "time for request:  MIN  MAX  MEAN  SD  +/-SD"
    awk '/^time for request:/ { print ms($6), ms($5) } function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; return v * 1000 }' <<<"$out"
}

declare -A HMEAN HMAX MP50 MP99 TPS
for round in $(seq "$RUNS"); do
    for v in baseline nice0 nice19; do
        target=$v; [ "$v" = baseline ] && target=nice19
        t0="$(transcodes "$target")"
        if [ "$v" != baseline ]; then
            nice -n 19 wrk -t1 -c"$CONNS" -d"$((DURATION + 2))s" -s "$TMP/misses.lua" "http://127.0.0.1:${PORT[$target]}/" >"$TMP/wrk.out" 2>&1 &
            WRK_PID=$!
            sleep 1
        fi
        read -r mean max <<<"$(hits "${PORT[$target]}")"
        if [ "$v" != baseline ]; then
            wait "$WRK_PID"; WRK_PID=""
            line="$(grep WRKSTAT "$TMP/wrk.out")"
            MP50[$v]+="$(sed 's/.*p50_us=\([0-9]*\).*/\1/' <<<"$line") "
            MP99[$v]+="$(sed 's/.*p99_us=\([0-9]*\).*/\1/' <<<"$line") "
        fi
        t1="$(transcodes "$target")"
        tps="$(awk -v a="$t0" -v b="$t1" -v d="$((DURATION + 2))" 'BEGIN { printf "%.0f", (b - a) / d }')"
        HMEAN[$v]+="$mean "; HMAX[$v]+="$max "; TPS[$v]+="$tps "
        log "round $round $v: hits mean ${mean} ms max ${max} ms; ${tps} transcodes/s"
    done
done

base="$(median "${HMEAN[baseline]}")"
echo "### Hits at $RATE/s while transcoding at full demand (median of $RUNS rounds of ${DURATION} s)"
echo
echo "| Helpers | Hit mean (ms) | vs baseline | Hit max (ms) | Miss p50 (ms) | Miss p99 (ms) | Transcodes/s |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for v in baseline nice0 nice19; do
    m="$(median "${HMEAN[$v]}")"
    if [ "$v" = baseline ]; then p50="-"; p99="-"; else
        p50="$(awk -v u="$(median "${MP50[$v]}")" 'BEGIN { printf "%.1f", u / 1000 }')"
        p99="$(awk -v u="$(median "${MP99[$v]}")" 'BEGIN { printf "%.1f", u / 1000 }')"
    fi
    echo "| $v | $m | $(awk -v c="$m" -v b="$base" 'BEGIN { printf "%+.1f%%", (c / b - 1) * 100 }') | $(median "${HMAX[$v]}") | $p50 | $p99 | $(median "${TPS[$v]}") |"
done
echo
echo "Per round, hit means: baseline ${HMEAN[baseline]}/ nice0 ${HMEAN[nice0]}/ nice19 ${HMEAN[nice19]}"
