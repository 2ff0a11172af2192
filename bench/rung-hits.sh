#!/usr/bin/env bash
# bench/rung-hits.sh: cached hits per CPU-second with modules, rung by rung, side by side.
#
# What it measures
#   One Weir per rung, all running at once on one origin: (b) no module, (b2) the
#   same again (the noise floor: b2 / b should be 1), (c) the `empty` module on every
#   event, (h) the `access` module with the 20 rules and the cached Basic credentials
#   of bench/ladder-instructions.sh's rung (h), the client sending `Authorization`,
#   (k) no module, the client sending a field as long as (h)'s under a name a hit
#   ignores (what (h) is compared with, see ladder-instructions.sh), (i) the empty
#   proxy-wasm filter and (j) the filter adding a header (bench/wasm/*.wat, as in
#   bench/ladder-instructions.sh). Each round loads each rung in turn with
#   `wrk -t1 -cCONNS -dDURATION` on a 1 KB hit and reads the Weir process's CPU time
#   before and after: requests per CPU-second. Reported: every round, and for each
#   rung its median and its median ratio to BASE (b) over the rounds, with the middle
#   half of those ratios, their mean with its standard error, and all rounds
#   together (all requests over all CPU time) with its ratio to BASE.
#
#   PIN=1 gives every Weir one worker thread on CPU 0 and runs wrk on CPU 1, so the
#   proxy has a core to itself and does not share it with the load generator: on a
#   2-core machine that takes out most of the round-to-round swing of the unpinned
#   runs (wrk and two workers sharing two cores, scheduled differently every time),
#   which is larger than the 1-5% the module targets are about. Pinned, each rung is
#   a single event loop: the ratios are those of one core's worth of work.
#   ORDER=rotate starts round r with the r-th rung, so no rung always runs first.
#
#   SHARED=1 runs one Weir for all the rungs: a listener per rung, each with its
#   rung's module only (`modules = [...]`; at most one of i and j). The rungs then
#   share the process, its threads, caches and allocator, and whatever slows the
#   machine down for a while slows them alike: with short rounds (DURATION=1s) taken
#   in rotating order, each round's ratios compare requests served within a few
#   seconds of each other by the same process. The CPU time is the process's, read
#   per rung's burst from its threads' schedstat (nanoseconds) in every mode.
#
#   PERF=1 also samples each module rung's Weir with `perf record -e cpu-clock` (no
#   call graphs, 4,999 Hz, for all of the run but its first and last second; every
#   rung is sampled, so the requests per CPU-second still compare) and
#   reports the share of the samples that fall in code that only the module runs:
#   its own functions ((c) `diagnostics::empty`; (h) `access`, the credentials' hash
#   and removing their field; (i), (j) `weir_wasm`, wasmtime, the filter's compiled
#   code and the module states). That share is measured within one run, so the
#   swing between runs does not enter it; what the module adds to the engine's own
#   functions (dispatch, the transaction) is not in it, and docs/benchmarks.md says
#   how the instruction counts of bench/ladder-instructions.sh account for that part.
#
# How to run
#   bench/rung-hits.sh                                  # 5 rounds of 10 s, 64 connections
#   CONNS=2 ROUNDS=4 RUNGS="b i b2" bench/rung-hits.sh
#   PIN=1 ORDER=rotate ROUNDS=15 DURATION=4s RUNGS="k h b2" BASE=k bench/rung-hits.sh
#   PERF=1 ROUNDS=3 DURATION=7s RUNGS="b c h i j" bench/rung-hits.sh
#   SHARED=1 ORDER=rotate ROUNDS=30 DURATION=1s RUNGS="b i" bench/rung-hits.sh
# Needs wrk, curl, python3, wat2wasm (rungs i, j), htpasswd (rung h) and, with PERF=1,
# perf (Debian's linux-perf); installed with apt-get when missing. Builds Weir unless BUILD=0 (WEIR_BIN picks another
# build). Loopback only; what it starts is stopped on exit.
set -euo pipefail
BENCH_TAG=rung-hits
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"

ROUNDS="${ROUNDS:-5}"
DURATION="${DURATION:-10s}"
CONNS="${CONNS:-64}"
RUNGS="${RUNGS:-b i b2 j c}"
BUILD="${BUILD:-1}"
BASE="${BASE:-b}"
PIN="${PIN:-0}"
ORDER="${ORDER:-fixed}"
SHARED="${SHARED:-0}"
WEIR_BIN="${WEIR_BIN:-$ROOT/target/release/weir}"

ensure_tools wrk:wrk curl:curl python3:python3 wat2wasm:wabt htpasswd:apache2-utils
[ "$PIN" = 1 ] && ensure_tools taskset:util-linux
PERF="${PERF:-0}"
SECONDS_EACH="${DURATION%s}"
if [ "$PERF" = 1 ]; then
    ensure_tools perf:linux-perf
    [[ "$SECONDS_EACH" =~ ^[0-9]+$ ]] && [ "$SECONDS_EACH" -ge 4 ] ||
        die "PERF=1 needs DURATION in whole seconds, at least 4s (not $DURATION)"
fi
# own_code RUNG: the symbols that only the rung's module runs (see PERF above).
own_code() {
    case "$1" in
        c) echo 'diagnostics::empty' ;;
        h) echo 'weir_modules::access|foldhash|HeaderMap<T>::remove' ;;
        i | j) echo 'weir_wasm|wasmtime|JIT|Txn::state|Txn::extra|type_id' ;;
        *) echo '' ;;
    esac
}
case " $RUNGS " in *" $BASE "*) ;; *) die "BASE=$BASE is not one of RUNGS ($RUNGS)" ;; esac
case "$ORDER" in fixed | rotate) ;; *) die "ORDER must be fixed or rotate" ;; esac
if [ "$SHARED" = 1 ]; then
    [ "$PERF" = 1 ] && die "PERF=1 samples a process per rung: not with SHARED=1"
    case " $RUNGS " in *" i "*" j "* | *" j "*" i "*) die "SHARED=1 takes one of the wasm rungs i and j (one module per name)" ;; esac
fi
[ "$BUILD" = 1 ] && (cd "$ROOT" && cargo build --release -p weir) >&2
STARTED_PIDS=()
TMP="$(mktemp -d -t weir-rung-hits.XXXXXX)"
trap bench_cleanup EXIT INT TERM

head -c 1024 /dev/zero | tr '\0' x > "$TMP/1k"
wat2wasm "$ROOT/bench/wasm/empty.wat" -o "$TMP/empty.wasm"
wat2wasm "$ROOT/bench/wasm/add-header.wat" -o "$TMP/add-header.wasm"
# Cost 10, htpasswd's default: checked once per run, off the proxy's threads.
htpasswd -cbB -C 10 "$TMP/users" "$ACCESS_USER" "$ACCESS_PASSWORD" 2>/dev/null
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

declare -A PID PORT FIELD
ON_PROXY_CPU=(); ON_LOAD_CPU=()
if [ "$PIN" = 1 ]; then ON_PROXY_CPU=(taskset -c 0); ON_LOAD_CPU=(taskset -c 1); fi
# module_name RUNG: the name of the rung's module (none for b, b2, k).
module_name() {
    case "$1" in
        b | b2 | k) ;;
        c) echo empty ;;
        h) echo access ;;
        i | j) echo wasm ;;
        *) die "unknown rung $1 (b, b2, c, h, i, j, k)" ;;
    esac
}
# rung_module RUNG: the rung's `[[module]]` section (none for b, b2, k).
rung_module() {
    local name
    name=$(module_name "$1")
    [ -n "$name" ] || return 0
    printf '[[module]]\nname = "%s"\n' "$name"
    case "$1" in
        h) access_settings "$TMP/users" ;;
        i) printf 'path = "%s"\n' "$TMP/empty.wasm" ;;
        j) printf 'path = "%s"\n' "$TMP/add-header.wasm" ;;
    esac
}
# rung_listener RUNG: the rung's listener; in one shared Weir, with its module only.
rung_listener() {
    printf '[[listen]]\naddr = "127.0.0.1:%s"\nmode = "reverse"\norigin = "http://127.0.0.1:%s"\n' "${PORT[$1]}" "$OPORT"
    if [ "$SHARED" = 1 ]; then
        local name
        name=$(module_name "$1")
        if [ -n "$name" ]; then printf 'modules = ["%s"]\n' "$name"; else printf 'modules = []\n'; fi
    fi
}
config_head() {
    printf '[admin]\nlisten = "off"\n[log]\naccess = "off"\n'
    [ "$PIN" = 1 ] && printf '[server]\nworkers = 1\n'
    return 0
}
# start_weir NAME CONFIG PORT: starts a Weir and waits for PORT; its pid in WEIR_PID.
start_weir() {
    WEIR_LOG=warn "${ON_PROXY_CPU[@]}" "$WEIR_BIN" run --config "$2" >"$TMP/$1.log" 2>&1 &
    WEIR_PID=$!
    STARTED_PIDS+=("$WEIR_PID")
    wait_ready "weir ($1)" "$WEIR_PID" "$3"
}
for rung in $RUNGS; do
    module_name "$rung" >/dev/null  # an unknown rung stops the run here
    port=$(pick_port); USED_PORTS+="$port "; PORT[$rung]=$port
done
if [ "$SHARED" = 1 ]; then
    {
        config_head
        for rung in $RUNGS; do rung_module "$rung"; done
        for rung in $RUNGS; do rung_listener "$rung"; done
    } > "$TMP/shared.toml"
    read -r -a all <<< "$RUNGS"
    start_weir shared "$TMP/shared.toml" "${PORT[${all[-1]}]}"
    shared_pid=$WEIR_PID
fi
for rung in $RUNGS; do
    if [ "$SHARED" = 1 ]; then
        PID[$rung]=$shared_pid
    else
        { config_head; rung_listener "$rung"; rung_module "$rung"; } > "$TMP/$rung.toml"
        start_weir "$rung" "$TMP/$rung.toml" "${PORT[$rung]}"
        PID[$rung]=$WEIR_PID
    fi
    url="http://127.0.0.1:${PORT[$rung]}/1k"
    case "$rung" in
        h) FIELD[$rung]="$ACCESS_CREDENTIALS" ;;
        k) FIELD[$rung]="$LIKE_CREDENTIALS" ;;
        *) FIELD[$rung]="" ;;
    esac
    extra=(); [ -n "${FIELD[$rung]}" ] && extra=(-H "${FIELD[$rung]}")
    curl -s -o /dev/null "${extra[@]}" "$url"
    curl -si "${extra[@]}" "$url" | grep -qi '^cache-status: weir; hit' || die "rung $rung: not a hit"
done

declare -A RATES SHARES REQS NSUM
echo "| round | rung | requests | CPU seconds | requests per CPU-second | module's own code, share of samples |"
echo "| ---: | --- | ---: | ---: | ---: | ---: |"
read -r -a ALL <<< "$RUNGS"
for round in $(seq "$ROUNDS"); do
    mapfile -t order < <(rotated "$round" "${ALL[@]}")
    for rung in "${order[@]}"; do
        extra=(); [ -n "${FIELD[$rung]}" ] && extra=(-H "${FIELD[$rung]}")
        own="$(own_code "$rung")"
        perf_pid=""
        # Every rung is sampled, so that what sampling costs is the same for all.
        if [ "$PERF" = 1 ]; then
            (sleep 1; exec perf record -q -e cpu-clock -F 4999 -p "${PID[$rung]}" \
                -o "$TMP/perf.data" -- sleep $((SECONDS_EACH - 2)) >/dev/null 2>&1) &
            perf_pid=$!
        fi
        t0=$(cpu_ns_snapshot "${PID[$rung]}")
        n=$("${ON_LOAD_CPU[@]}" wrk -t1 -c"$CONNS" -d"$DURATION" "${extra[@]}" "http://127.0.0.1:${PORT[$rung]}/1k" |
            awk '/requests in/ { print $1 }')
        t1=$(cpu_ns_snapshot "${PID[$rung]}")
        share="–"
        if [ -n "$perf_pid" ]; then
            wait "$perf_pid" || die "perf record failed on rung $rung"
        fi
        if [ -n "$perf_pid" ] && [ -n "$own" ]; then
            share=$(perf report -i "$TMP/perf.data" --no-children --sort dso,sym --stdio -n 2>/dev/null |
                awk -v own="$own" '/^ +[0-9.]+%/ { all += $2; if ($0 ~ own) mine += $2 }
                    END { if (all > 0) printf "%.2f%%", 100 * mine / all }')
            SHARES[$rung]+="${share%\%} "
        fi
        ns=$(cpu_delta "$t0" "$t1")
        rate=$(awk -v n="$n" -v ns="$ns" 'BEGIN { printf "%d", n * 1e9 / ns }')
        RATES[$rung]+="$rate "
        REQS[$rung]=$(( ${REQS[$rung]:-0} + n ))
        NSUM[$rung]=$(( ${NSUM[$rung]:-0} + ns ))
        echo "| $round | $rung | $n | $(awk -v ns="$ns" 'BEGIN { printf "%.2f", ns / 1e9 }') | $rate | $share |"
    done
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# quartiles: the first and third quartile of the numbers on stdin.
quartiles() { tr ' ' '\n' | grep . | sort -n | awk '{ v[NR] = $1 } END { q1 = int((NR + 3) / 4); q3 = int((3 * NR + 3) / 4); printf "%s–%s", v[q1], v[q3] }'; }
echo
# mean_sem: the mean of the numbers on stdin and its standard error.
mean_sem() { tr ' ' '\n' | grep . | awk '{ s += $1; q += $1 * $1; n++ } END {
    m = s / n; v = (n > 1) ? (q - n * m * m) / (n - 1) : 0; if (v < 0) v = 0
    printf "%.4f ± %.4f", m, sqrt(v / n) }'; }
echo "| rung | median requests per CPU-second | median of the rounds' ratios to ($BASE) | middle half of the ratios | mean of the ratios ± standard error | all rounds together: requests per CPU-second | its ratio to ($BASE) |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
all_rate() { awk -v n="${REQS[$1]}" -v ns="${NSUM[$1]}" 'BEGIN { printf "%d", n * 1e9 / ns }'; }
for rung in $RUNGS; do
    read -r -a mine <<< "${RATES[$rung]}"
    read -r -a base <<< "${RATES[$BASE]:-}"
    ratios=""
    for k in "${!mine[@]}"; do
        [ -n "${base[$k]:-}" ] && ratios+="$(awk -v a="${mine[$k]}" -v b="${base[$k]}" 'BEGIN { printf "%.4f", a / b }') "
    done
    together=$(awk -v a="$(all_rate "$rung")" -v b="$(all_rate "$BASE")" 'BEGIN { printf "%.4f", a / b }')
    echo "| $rung | $(echo "${RATES[$rung]}" | median) | $(echo "$ratios" | median) | $(echo "$ratios" | quartiles) | $(echo "$ratios" | mean_sem) | $(all_rate "$rung") | $together |"
done
if [ "$PERF" = 1 ]; then
    echo
    echo "| rung | module's own code, median share of samples | rounds |"
    echo "| --- | ---: | --- |"
    for rung in $RUNGS; do
        [ -n "${SHARES[$rung]:-}" ] && echo "| $rung | $(echo "${SHARES[$rung]}" | median)% | ${SHARES[$rung]}|"
    done
fi
