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
#      Each round measures these variants (VARIANTS), DURATION each, the baseline first
#      and the others in an order that rotates from round to round:
#        baseline  hits only, on nice19's Weir, no transcoding
#        nice0     hits, while wrk asks nice0's Weir for photographs at new URLs
#                  (every request a miss and a transcode) on CONNS connections
#        nice19    the same on nice19's Weir
#        plain     (not by default) the same misses on nice19's Weir, for the photographs
#                  under a type the transcoder leaves alone: what the misses cost
#                  the hits without any transcoding
#        spin      hits only, with one busy loop per core at
#                  SCHED_IDLE: the baseline without idle cores. A virtual machine's
#                  idle core sleeps and is slow to wake, so a busy machine can answer
#                  hits faster than an idle one; this separates that from what the
#                  helpers' work itself costs the hits.
#      Hits: h2load over HTTP/1.1, RATE requests per second in all (open loop, fixed
#      rate), on the hot object; the mean, p50, p99 and max of every hit's time (from
#      h2load's per-request log), and each variant's ratio to the baseline of the same
#      round, whose median over the rounds is the headline. Misses: wrk's p50 and
#      p99, and transcodes per second (the module's counter). The origin and wrk run at
#      nice 19, standing in for machines of their own (on this 2-core machine they
#      would otherwise take CPU from the proxy and the hits whatever the helpers do).
#
# How to run
#   bench/transcode.sh                          # 5 rounds of 10 s
#   DURATION=5 RUNS=1 bench/transcode.sh        # a quick look
#   PARTS=2 VARIANTS="baseline plain nice19" bench/transcode.sh
#
# Environment: DURATION, RUNS, RATE (hits/s, default 1000), CONNS (wrk's, default 8),
# PARTS ("1 2" by default), VARIANTS ("baseline spin nice0 nice19"), BUILD (1 builds first).
#
# Output: Markdown tables on stdout. All traffic stays on 127.0.0.1; everything
# started here is stopped on exit.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BENCH_TAG=transcode
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

DURATION="${DURATION:-10}"
RUNS="${RUNS:-5}"
PARTS="${PARTS:-1 2}"
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

if [[ " $PARTS " == *" 1 "* ]]; then
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
fi
[[ " $PARTS " == *" 2 "* ]] || exit 0

# 2. Hits at a fixed rate while transcoding at full demand.
if ! compgen -G "$TMP/www/photo*.jpg" >/dev/null; then # part 1 did not run: just the photographs
    OUT="$TMP/www" SECONDS_PER_MODE=1 "$EXAMPLE_BIN" "${photo_paths[@]}" >/dev/null
fi
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
# The same photographs under a type the transcoder does not hold back, for `plain`.
for f in "$TMP/www"/photo*.jpg; do cp "$f" "${f%.jpg}.bin"; done
misses_lua() { # $1 = extension
    cat <<LUA
n = 0
request = function()
  n = n + 1
  return wrk.format("GET", "/photo" .. (n % $n_photos) .. ".$1?u=" .. math.random(1, 1e9) .. "-" .. n)
end
LUA
    wrk_report_lua
}
misses_lua jpg >"$TMP/misses-jpg.lua"
misses_lua bin >"$TMP/misses-bin.lua"

transcodes() {
    curl -sS "http://127.0.0.1:${ADMIN[$1]}/metrics" |
        awk '$1 == "weir_module_transcode_done_total" { print $2 }'
}
# hits PORT: the mean, p50, p99 and max of the hits' times in ms, at RATE requests/s,
# from h2load's log of every request (column 3: microseconds to the end of the response).
hits() {
    local out
    rm -f "$TMP/hits.log" # h2load appends to it
    out="$(h2load --h1 -c "$HIT_CLIENTS" --rps "$(( RATE / HIT_CLIENTS ))" -D "$DURATION" \
        --log-file "$TMP/hits.log" "http://127.0.0.1:$1/hot.txt" 2>&1)"
    grep -q '^status codes: .* 0 3xx, 0 4xx, 0 5xx' <<<"$out" || { echo "$out" >&2; die "hits failed"; }
    awk -F'\t' '$2 == 200 { print $3 }' "$TMP/hits.log" | sort -n | awk '
        { t[NR] = $1; sum += $1 }
        END {
            if (NR == 0) exit 1
            printf "%.3f %.3f %.3f %.3f\n", sum / NR / 1000, t[int(NR * 0.50 + 0.5)] / 1000,
                t[int(NR * 0.99 + 0.5)] / 1000, t[NR] / 1000
        }' || die "h2load logged no hits"
}

VARIANT_LIST=(${VARIANTS:-baseline spin nice0 nice19})
for v in "${VARIANT_LIST[@]}"; do
    case "$v" in baseline|plain|spin|nice0|nice19) ;; *) die "unknown variant '$v' (baseline plain spin nice0 nice19)";; esac
done
[ "${VARIANT_LIST[0]}" = baseline ] || die "VARIANTS must start with baseline (the others are compared with it)"
declare -A HMEAN HP50 HP99 HMAX MP50 MP99 TPS
for round in $(seq "$RUNS"); do
    # The baseline first (what each other variant is compared with, round by round),
    # the others rotated so that none is always right after it.
    others=("${VARIANT_LIST[@]:1}")
    n_others=${#others[@]}
    if [ "$n_others" -gt 0 ]; then
        k=$(( (round - 1) % n_others ))
        others=("${others[@]:k}" "${others[@]:0:k}")
    fi
    for v in baseline "${others[@]}"; do
        # baseline and plain run on nice19's Weir; plain asks for the photographs as
        # .bin, which the transcoder leaves alone: the misses' own cost, no transcoding.
        target=$v; lua=misses-jpg.lua
        case "$v" in baseline|spin) target=nice19;; plain) target=nice19; lua=misses-bin.lua;; esac
        t0="$(transcodes "$target")"
        spinners=()
        if [ "$v" = spin ]; then
            for _ in $(seq "$(nproc)"); do
                chrt --idle 0 nice -n 19 bash -c 'while :; do :; done' &
                spinners+=("$!"); STARTED_PIDS+=("$!")
            done
            sleep 1
        elif [ "$v" != baseline ]; then
            nice -n 19 wrk -t1 -c"$CONNS" -d"$((DURATION + 2))s" -s "$TMP/$lua" "http://127.0.0.1:${PORT[$target]}/" >"$TMP/wrk.out" 2>&1 &
            WRK_PID=$!
            sleep 1
        fi
        read -r mean p50 p99 max <<<"$(hits "${PORT[$target]}")"
        if [ "${#spinners[@]}" -gt 0 ]; then kill "${spinners[@]}"; wait "${spinners[@]}" 2>/dev/null || true; fi
        if [ "$v" != baseline ] && [ "$v" != spin ]; then
            wait "$WRK_PID"; WRK_PID=""
            line="$(grep WRKSTAT "$TMP/wrk.out")"
            MP50[$v]+="$(sed 's/.*p50_us=\([0-9]*\).*/\1/' <<<"$line") "
            MP99[$v]+="$(sed 's/.*p99_us=\([0-9]*\).*/\1/' <<<"$line") "
        fi
        t1="$(transcodes "$target")"
        tps="$(awk -v a="$t0" -v b="$t1" -v d="$((DURATION + 2))" 'BEGIN { printf "%.0f", (b - a) / d }')"
        HMEAN[$v]+="$mean "; HP50[$v]+="$p50 "; HP99[$v]+="$p99 "; HMAX[$v]+="$max "; TPS[$v]+="$tps "
        log "round $round $v: hits mean ${mean} ms, p50 ${p50} ms, p99 ${p99} ms, max ${max} ms; ${tps} transcodes/s"
    done
done

change() { awk -v r="$1" 'BEGIN { printf "%+.1f%%", (r - 1) * 100 }'; }
# ratios A B: A's per-round values divided by B's, round by round.
ratios() { paste -d' ' <(tr -s ' ' '\n' <<<"$1" | grep .) <(tr -s ' ' '\n' <<<"$2" | grep .) | awk '{ printf "%.3f ", $1 / $2 }'; }
refs=(baseline)
[[ " ${VARIANT_LIST[*]} " == *" spin "* ]] && refs+=(spin)
echo "### Hits at $RATE/s while transcoding at full demand ($RUNS rounds of ${DURATION} s)"
echo
echo "Medians over the rounds. *vs X*: the median, over the rounds, of the variant's hit time divided by X's in the same round (mean / p50)."
echo
header="| Variant | Hit mean (ms) | Hit p50 (ms) | Hit p99 (ms) | Hit max (ms) |"; rule="|---|---:|---:|---:|---:|"
for r in "${refs[@]}"; do header+=" vs $r (mean / p50) |"; rule+="---:|"; done
echo "$header Miss p50 (ms) | Miss p99 (ms) | Transcodes/s |"
echo "$rule---:|---:|---:|"
for v in "${VARIANT_LIST[@]}"; do
    row="| $v | $(median "${HMEAN[$v]}") | $(median "${HP50[$v]}") | $(median "${HP99[$v]}") | $(median "${HMAX[$v]}") |"
    for r in "${refs[@]}"; do
        if [ "$v" = "$r" ] || { [ "$v" = baseline ] && [ "$r" = spin ]; }; then row+=" |"; continue; fi
        row+=" $(change "$(median "$(ratios "${HMEAN[$v]}" "${HMEAN[$r]}")")") / $(change "$(median "$(ratios "${HP50[$v]}" "${HP50[$r]}")")") |"
    done
    if [ -n "${MP50[$v]:-}" ]; then
        row+=" $(awk -v u="$(median "${MP50[$v]}")" 'BEGIN { printf "%.1f", u / 1000 }') | $(awk -v u="$(median "${MP99[$v]}")" 'BEGIN { printf "%.1f", u / 1000 }') |"
    else row+=" - | - |"; fi
    echo "$row $(median "${TPS[$v]}") |"
done
echo
echo "Per round (ms):"
echo
for v in "${VARIANT_LIST[@]}"; do
    echo "- $v: hit means ${HMEAN[$v]}; p50 ${HP50[$v]}; p99 ${HP99[$v]}"
done
