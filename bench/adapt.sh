#!/usr/bin/env bash
# bench/adapt.sh: cached-hit throughput with the content-adaptation modules on and off.
#
# What it measures
#   Three Weirs side by side, reverse mode, one origin (python3 http.server) on loopback:
#     off       no module
#     adblock   [[module]] adblock with EasyList + EasyPrivacy (Debian's
#               webext-ublock-origin-firefox, installed when missing)
#     compress  [[module]] compress (defaults); the client sends
#               `Accept-Encoding: gzip`, so every request is a hit on the stored
#               gzip variant
#   The cached object is an 8 KB C source file (zlib1g-dev's fitblk.c, installed when
#   missing), served as text/plain. wrk -t1 -c64 fetches it for DURATION per run;
#   requests per CPU-second of the proxy (utime+stime) and wall-clock req/s, median
#   of RUNS rounds, each round running off, adblock, compress in turn.
#   Before measuring, checks that each answers a hit (and, for compress, gzip).
#
# How to run
#   bench/adapt.sh                     # 3 rounds of 10 s
#   DURATION=5s RUNS=1 bench/adapt.sh  # a quick look
#
# Output: a Markdown table on stdout. All traffic stays on 127.0.0.1; everything
# started here is stopped on exit.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BENCH_TAG=adapt
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

DURATION="${DURATION:-10s}"
RUNS="${RUNS:-3}"
CONNS="${CONNS:-64}"
BUILD="${BUILD:-1}"
WEIR_BIN="${WEIR_BIN:-$ROOT/target/release/weir}"
KEEP_TMP="${KEEP_TMP:-0}"
VARIANTS=(off adblock compress)

ensure_tools wrk curl python3
if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
for pkg in webext-ublock-origin-firefox zlib1g-dev; do
    if ! dpkg -s "$pkg" >/dev/null 2>&1; then
        log "installing $pkg"
        $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$pkg" >&2
    fi
done
EASYLIST="$(dpkg -L webext-ublock-origin-firefox | grep -m1 '/easylist.txt$')"
EASYPRIVACY="$(dpkg -L webext-ublock-origin-firefox | grep -m1 '/easyprivacy.txt$')"
CFILE="$(dpkg -L zlib1g-dev | grep -m1 '/fitblk.c$')"
[ -f "$EASYLIST" ] && [ -f "$EASYPRIVACY" ] || die "EasyList/EasyPrivacy not found"
[ -f "$CFILE" ] || die "fitblk.c not found"

if [ "$BUILD" = 1 ]; then
    log "building weir (cargo build --release -p weir)"
    (cd "$ROOT" && cargo build --release -p weir) >&2 || die "cargo build failed"
fi
[ -x "$WEIR_BIN" ] || die "no Weir binary at $WEIR_BIN"

TMP="$(mktemp -d "${TMPDIR:-/tmp}/weir-adapt.XXXXXX")"
STARTED_PIDS=()
WRK_PID=""
SAVE_LOGS=""
OUT_DIR="${OUT_DIR:-$ROOT/bench/out}"
trap bench_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

USED_PORTS=" "
PORT_ORIGIN=$(pick_port); USED_PORTS+="$PORT_ORIGIN "
declare -A PORT PID
for v in "${VARIANTS[@]}"; do PORT[$v]=$(pick_port); USED_PORTS+="${PORT[$v]} "; done

mkdir -p "$TMP/www"
cp "$CFILE" "$TMP/www/source.txt"
touch -d '1 day ago' "$TMP/www/source.txt"   # heuristic freshness: hours
(cd "$TMP/www" && exec python3 -m http.server "$PORT_ORIGIN" --bind 127.0.0.1) >"$TMP/origin.log" 2>&1 &
STARTED_PIDS+=("$!")
wait_ready origin "$!" "$PORT_ORIGIN"

for v in "${VARIANTS[@]}"; do
    {
        printf '[admin]\nlisten = "off"\n\n[log]\naccess = "off"\n\n[cache]\ndisk = "off"\n\n'
        printf '[[listen]]\naddr = "127.0.0.1:%s"\nmode = "reverse"\norigin = "http://127.0.0.1:%s"\n' "${PORT[$v]}" "$PORT_ORIGIN"
        case "$v" in
            adblock) printf '\n[[module]]\nname = "adblock"\nlists = ["%s", "%s"]\n' "$EASYLIST" "$EASYPRIVACY";;
            compress) printf '\n[[module]]\nname = "compress"\n';;
        esac
    } >"$TMP/weir-$v.toml"
    WEIR_LOG=warn "$WEIR_BIN" run --config "$TMP/weir-$v.toml" </dev/null >"$TMP/weir-$v.log" 2>&1 &
    PID[$v]=$!
    STARTED_PIDS+=("${PID[$v]}")
    wait_ready "weir ($v)" "${PID[$v]}" "${PORT[$v]}"
done

ae_of() { if [ "$1" = compress ]; then echo "Accept-Encoding: gzip"; else echo "X-None: 1"; fi; }
for v in "${VARIANTS[@]}"; do
    url="http://127.0.0.1:${PORT[$v]}/source.txt"
    for _ in 1 2; do curl -sS -o /dev/null -H "$(ae_of "$v")" "$url"; done
    curl -sS -D "$TMP/h" -o /dev/null -H "$(ae_of "$v")" "$url"
    grep -qiE '^cache-status:.*weir; *hit' "$TMP/h" || { cat "$TMP/h" >&2; die "$v: not a hit"; }
    if [ "$v" = compress ]; then grep -qi '^content-encoding: *gzip' "$TMP/h" || die "compress: not gzip"; fi
done

wrk_report_lua >"$TMP/report.lua"
declare -A RPS CPS
for round in $(seq "$RUNS"); do
    for v in "${VARIANTS[@]}"; do
        url="http://127.0.0.1:${PORT[$v]}/source.txt"
        s0="$(cpu_snapshot "${PID[$v]}")"
        out="$(wrk -t1 -c"$CONNS" -d"$DURATION" -H "$(ae_of "$v")" -s "$TMP/report.lua" "$url")"
        s1="$(cpu_snapshot "${PID[$v]}")"
        line="$(grep WRKSTAT <<<"$out")"
        req="$(sed 's/.*requests=\([0-9]*\).*/\1/' <<<"$line")"
        us="$(sed 's/.*duration_us=\([0-9]*\).*/\1/' <<<"$line")"
        ticks="$(cpu_delta "$s0" "$s1")"
        rps="$(awk -v r="$req" -v u="$us" 'BEGIN { printf "%.0f", r / (u / 1e6) }')"
        cps="$(awk -v r="$req" -v t="$ticks" -v k="$(getconf CLK_TCK)" 'BEGIN { printf "%.0f", t > 0 ? r / (t / k) : 0 }')"
        RPS[$v]+="$rps "; CPS[$v]+="$cps "
        log "round $round $v: $rps req/s, $cps req/CPU-s"
    done
done

median() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
base="$(median "${CPS[off]}")"
echo "| variant | req/s (wall) | req per CPU-second | vs off |"
echo "|---|---|---|---|"
for v in "${VARIANTS[@]}"; do
    c="$(median "${CPS[$v]}")"
    echo "| $v | $(median "${RPS[$v]}") | $c | $(awk -v c="$c" -v b="$base" 'BEGIN { printf "%+.1f%%", (c / b - 1) * 100 }') |"
done
