#!/usr/bin/env bash
# bench/polymix-peers.sh: the PolyMix-style workload (`weir-bench polymix`) through
# Weir and other caching proxies from Debian, one after the other on the same machine.
#
# What it does
#   For each proxy in PROXIES (in that order, RUNS rounds, the order reversed every
#   other round so that drift touches all alike), it starts the proxy on a free
#   127.0.0.1 port from its config in bench/polymix/ (256 MB of memory for its cache
#   each), runs `weir-bench polymix --proxy ... --proxy-pid ...` against it (the same
#   seed, so the same requests; the origin's virtual servers on fixed ports from
#   ORIGIN_BASE on), stops it, and finally prints one table from the runs'
#   report.json files, with Weir's requests per CPU-second as a ratio to each peer's.
#   Requests per CPU-second count every process of the proxy (nginx: master and
#   workers; Varnish: manager and child).
#
#   Squid, nginx and `weir` are forward proxies (absolute URLs). Varnish, HAProxy,
#   Apache Traffic Server and `weir-reverse` are reverse proxies: the client sends
#   `GET /path` with `Host: sN.polymix.test`, and each config routes that host to
#   virtual server N's port (`weir-bench polymix --reverse`).
#
# How to run (as root or with sudo, on Debian: the peers' packages are installed with
# apt-get when missing; a system service an install starts is stopped again)
#   bench/polymix-peers.sh                           # every proxy, 1 round
#   RATE=400 PLATEAU=120 PROXIES="weir squid" bench/polymix-peers.sh
#
# Environment
#   PROXIES   which proxies (default "weir weir-reverse squid nginx varnish haproxy
#             trafficserver")
#   RUNS      rounds (default 1)
#   RATE      requests per second offered (default 200)
#   FILL      fill phase, seconds (default 30)
#   PLATEAU   plateau, seconds (default 90)
#   SEED      workload seed (default 1)
#   SERVERS   virtual origin servers (default 16)
#   BUILD     0 skips `cargo build --release -p weir -p weir-bench`
#   OUT_DIR   where results go (default bench/out)
#   KEEP_TMP  1 keeps the temporary directory (configs, logs)
#
# Output: a Markdown table (medians over the rounds) on stdout and in bench/out/polymix-peers-<UTC>/table.md,
# with each run's report.md, report.json and polymix.svg under <proxy>-<round>/.
# All traffic stays on 127.0.0.1; everything started here is stopped on exit.

set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BENCH_TAG=polymix-peers
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

PROXIES="${PROXIES:-weir weir-reverse squid nginx varnish haproxy trafficserver}"
RUNS="${RUNS:-1}"
RATE="${RATE:-200}"
FILL="${FILL:-30}"
PLATEAU="${PLATEAU:-90}"
SEED="${SEED:-1}"
SERVERS="${SERVERS:-16}"
BUILD="${BUILD:-1}"
OUT_DIR="${OUT_DIR:-$ROOT/bench/out}"
BENCH_BIN="$ROOT/target/release/weir-bench"
WEIR_BIN="$ROOT/target/release/weir"

STARTED_PIDS=()
TMP="$(mktemp -d)"
SAVE_LOGS="squid-cache.log nginx-error.log weir.stderr varnish.log haproxy.log trafficserver.log"
trap bench_cleanup EXIT
trap 'exit 130' INT TERM

tools=(python3:python3)
for p in $PROXIES; do
    case "$p" in
        weir|weir-reverse) ;;
        squid) tools+=(squid:squid) ;;
        nginx) tools+=(nginx:nginx) ;;
        varnish) tools+=(varnishd:varnish) ;;
        haproxy) tools+=(haproxy:haproxy) ;;
        trafficserver) tools+=(traffic_server:trafficserver) ;;
        *) die "unknown proxy '$p' (weir, weir-reverse, squid, nginx, varnish, haproxy, trafficserver)" ;;
    esac
done
# Debian's packages start their system service when installed (squid on 3128, the
# others on 80, 6081, 8080): not ours, so stop what this install started.
services=(squid:squid varnishd:varnish haproxy:haproxy traffic_server:trafficserver)
had=()
for spec in "${services[@]}"; do command -v "${spec%%:*}" >/dev/null 2>&1 && had+=("$spec"); done
ensure_tools "${tools[@]}"
for spec in "${services[@]}"; do
    [[ " ${had[*]} " == *" $spec "* ]] && continue
    if command -v "${spec%%:*}" >/dev/null 2>&1 && command -v service >/dev/null 2>&1; then
        service "${spec#*:}" stop >/dev/null 2>&1 || true
    fi
done
if [ "$BUILD" != 0 ]; then
    log "building weir and weir-bench (release)"
    (cd "$ROOT" && cargo build --release -p weir -p weir-bench >&2)
fi
[ -x "$BENCH_BIN" ] || die "no $BENCH_BIN (build it, or BUILD=1)"

# Squid and Varnish drop root for users of their own: they must write their files here.
chmod 777 "$TMP"
RAW="$OUT_DIR/polymix-peers-$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$RAW"
machine_info >"$RAW/env.txt" 2>/dev/null || true
warn_if_busy

# The virtual servers listen on ORIGIN_BASE .. ORIGIN_BASE+SERVERS-1 in every run, so
# that the reverse proxies' configs can name them.
pick_port_range() {
    local base p ok
    for _ in $(seq 50); do
        base=$(( 20000 + RANDOM % 12000 )); ok=1  # below the ephemeral range, as pick_port
        for p in $(seq "$base" $(( base + SERVERS - 1 ))); do
            port_free "$p" || { ok=0; break; }
        done
        if [ "$ok" = 1 ]; then echo "$base"; return 0; fi
    done
    die "no $SERVERS consecutive free ports found"
}
ORIGIN_BASE="$(pick_port_range)"
for p in $(seq "$ORIGIN_BASE" $(( ORIGIN_BASE + SERVERS - 1 ))); do USED_PORTS+="$p "; done

# render TEMPLATE PORT [OUTPUT]: a config from bench/polymix/TEMPLATE with @PORT@,
# @TMP@ and @BASE@ (the first origin port) filled in; a line holding @S@ or @SPORT@ is
# written once per virtual server, @S@ being its number and @SPORT@ its port. Prints
# the output's path (default $TMP/TEMPLATE minus .in); a copy goes with the results.
render() {
    local out="${3:-$TMP/$(basename "${1%.in}")}"
    awk -v port="$2" -v tmp="$TMP" -v base="$ORIGIN_BASE" -v n="$SERVERS" '{
        gsub(/@PORT@/, port); gsub(/@TMP@/, tmp); gsub(/@BASE@/, base)
        if (index($0, "@S@") || index($0, "@SPORT@")) {
            for (i = 0; i < n; i++) { l = $0; gsub(/@S@/, i, l); gsub(/@SPORT@/, base + i, l); print l }
        } else print
    }' "$ROOT/bench/polymix/$1" >"$out"
    mkdir -p "$RAW/configs"
    cp "$out" "$RAW/configs/$(basename "$out")"
    echo "$out"
}

# ATS reads its whole configuration directory: Debian's, with ours over it, under a
# run root of its own (the package's binaries and plugins, our directories).
setup_trafficserver() {
    local port="$1" dir="$TMP/ats" f layout
    rm -rf "$dir" "$TMP/ats-cache"
    mkdir -p "$dir/etc" "$dir/var" "$dir/run" "$dir/log" "$dir/cache" "$TMP/ats-cache"
    # Where the package put things (PREFIX:, SYSCONFDIR:, ... one a line).
    layout() { traffic_layout info 2>/dev/null | awk -v k="$1:" '$1 == k { print $2 }'; }
    [ -d "$(layout SYSCONFDIR)" ] && cp -r "$(layout SYSCONFDIR)/." "$dir/etc/"
    for f in records.config storage.config remap.config plugin.config; do
        render "trafficserver/$f.in" "$port" "$dir/etc/$f" >/dev/null
    done
    cp "$ROOT/bench/polymix/trafficserver/cache-status.conf" "$dir/etc/"
    cat >"$dir/runroot.yaml" <<YAML
prefix: $dir
exec_prefix: $(layout PREFIX)
bindir: $(layout BINDIR)
sbindir: $(layout BINDIR)
sysconfdir: $dir/etc
datadir: $(layout PREFIX)/share/trafficserver
includedir: $(layout INCLUDEDIR)
libdir: $(layout LIBDIR)
libexecdir: $(layout PLUGINDIR)
localstatedir: $dir/var
runtimedir: $dir/run
logdir: $dir/log
cachedir: $dir/cache
YAML
    echo "$dir/runroot.yaml"
}

# Reverse proxies route by the Host header and need origin-form requests.
client_mode() {
    case "$1" in
        weir-reverse|varnish|haproxy|trafficserver) echo --reverse ;;
        *) ;;
    esac
}

# start_proxy NAME PORT: starts it; sets PIDS to the processes to measure (run it in
# this shell, not in $(...): STARTED_PIDS must see the pid for the cleanup).
start_proxy() {
    local name="$1" port="$2" conf pid i
    case "$name" in
        weir|weir-reverse)
            conf="$(render "$name.toml.in" "$port")"
            WEIR_LOG=warn "$WEIR_BIN" run --config "$conf" 2>"$TMP/weir.stderr" &
            pid=$!
            ;;
        squid)
            conf="$(render squid.conf.in "$port")"
            squid -N -f "$conf" 2>>"$TMP/squid-cache.log" &
            pid=$!
            ;;
        nginx)
            conf="$(render nginx.conf.in "$port")"
            # Its cache is on disk: a new start must not find the last round's.
            rm -rf "$TMP/nginx-cache"
            mkdir -p "$TMP/nginx-cache"
            nginx -c "$conf" -e "$TMP/nginx-error.log" 2>>"$TMP/nginx-error.log" &
            pid=$!
            ;;
        varnish)
            conf="$(render varnish.vcl.in "$port")"
            # -F: in the foreground; the manager starts the child that serves.
            varnishd -F -a "127.0.0.1:$port" -f "$conf" -s malloc,256m -n "$TMP/varnish" \
                -T none >>"$TMP/varnish.log" 2>&1 &
            pid=$!
            ;;
        haproxy)
            conf="$(render haproxy.cfg.in "$port")"
            haproxy -db -f "$conf" >>"$TMP/haproxy.log" 2>&1 &
            pid=$!
            ;;
        trafficserver)
            conf="$(setup_trafficserver "$port")"
            traffic_server --run-root="$conf" >>"$TMP/trafficserver.log" 2>&1 &
            pid=$!
            ;;
    esac
    STARTED_PIDS+=("$pid")
    wait_ready "$name" "$pid" "$port"
    # Varnish's manager listens before its child runs: the child must be counted too.
    if [ "$name" = varnish ]; then
        for i in $(seq 100); do pgrep -P "$pid" >/dev/null 2>&1 && break; sleep 0.1; done
        sleep 1
    fi
    # Count the children with the parent (nginx's workers, Varnish's child).
    PIDS=("$pid")
    mapfile -t -O 1 PIDS < <(pgrep -P "$pid" 2>/dev/null || true)
}

stop_proxy() {
    local pid="$1" i
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

for round in $(seq "$RUNS"); do
    order=($PROXIES)
    if [ $((round % 2)) = 0 ]; then
        mapfile -t order < <(printf '%s\n' "${order[@]}" | tac)
    fi
    for name in "${order[@]}"; do
        port="$(pick_port)"; USED_PORTS+="$port "
        start_proxy "$name" "$port"
        pids=("${PIDS[@]}")
        log "round $round: $name on 127.0.0.1:$port (pids ${pids[*]})"
        args=(polymix --proxy "127.0.0.1:$port" --rate "$RATE" --fill-secs "$FILL"
              --plateau-secs "$PLATEAU" --seed "$SEED" --servers "$SERVERS"
              --origin-base-port "$ORIGIN_BASE" --out "$RAW/$name-$round" $(client_mode "$name"))
        for p in "${pids[@]}"; do args+=(--proxy-pid "$p"); done
        "$BENCH_BIN" "${args[@]}" >/dev/null || log "$name: the run stopped early (see $RAW/$name-$round/report.md)"
        stop_proxy "${pids[0]}"
    done
done

# One row per proxy: the median of its rounds (requests per CPU-second per round too).
python3 - "$RAW" >"$RAW/table.md" <<'EOF'
import json, os, statistics, sys
raw = sys.argv[1]
runs = {}
for d in sorted(os.listdir(raw)):
    f = os.path.join(raw, d, "report.json")
    if not os.path.exists(f):
        continue
    name = d.rsplit("-", 1)[0]
    runs.setdefault(name, []).append(json.load(open(f)))
cols = [
    ("hit ratio", lambda r, p: 100 * p["hit_ratio"], "%.1f%%"),
    ("stored copies (serial)", lambda r, p: 100 * p["stored_copies_by_serial"] / max(p["ok"], 1), "%.1f%%"),
    ("byte hit ratio", lambda r, p: 100 * p["byte_hit_ratio"], "%.1f%%"),
    ("not from origin", lambda r, p: 100 * p["not_from_origin_ratio"], "%.1f%%"),
    ("origin requests", lambda r, p: p["origin"]["requests"], "%.0f"),
    ("hit p50 (ms)", lambda r, p: p["latency"]["hits"]["p50_ms"], "%.2f"),
    ("hit p99 (ms)", lambda r, p: p["latency"]["hits"]["p99_ms"], "%.2f"),
    ("miss p50 (ms)", lambda r, p: p["latency"]["misses"]["p50_ms"], "%.1f"),
    ("mean (ms)", lambda r, p: p["latency"]["all"]["mean_ms"], "%.1f"),
    ("req/CPU-s", lambda r, p: p["requests_per_cpu_second"] or float("nan"), "%.0f"),
    ("errors", lambda r, p: p["errors"], "%.0f"),
]
def rate(r):
    return r["plateau"]["requests_per_cpu_second"] or float("nan")
def reverse(name):
    return ", reverse" in runs[name][0]["proxy"]
def reference(name):
    """The Weir run of the same mode (forward or reverse) when there is one."""
    want = "weir-reverse" if reverse(name) else "weir"
    return want if want in runs else ("weir" if "weir" in runs else "weir-reverse")
def ratio(name):
    """Median over the rounds of Weir's requests per CPU-second over this proxy's,
    each round against the Weir run of the same round."""
    ref = reference(name)
    if ref not in runs or ref == name:
        return ""
    pairs = [rate(w) / rate(r) for w, r in zip(runs[ref], runs[name]) if rate(r) > 0]
    return "%.2fx (%s)" % (statistics.median(pairs), ref) if pairs else ""
print("Plateau, the median of the rounds of each proxy (%s); each round's requests per "
      "CPU-second in brackets:\n" % ", ".join("%s: %d" % (k, len(v)) for k, v in runs.items()))
print("| proxy | mode | " + " | ".join(c[0] for c in cols) + " | Weir ÷ it (req/CPU-s) |")
print("|---|---|" + "---:|" * (len(cols) + 1))
for name, rs in runs.items():
    cells = []
    for title, f, fmt in cols:
        vals = [f(r, r["plateau"]) for r in rs]
        cell = fmt % statistics.median(vals)
        if title == "req/CPU-s" and len(vals) > 1:
            cell += " (" + ", ".join(fmt % v for v in vals) + ")"
        cells.append(cell)
    status = {r["status"] for r in rs}
    print("| %s%s | %s | %s | %s |" % (name, "" if status == {"complete"} else " (" + "; ".join(sorted(status)) + ")",
        "reverse" if reverse(name) else "forward", " | ".join(cells), ratio(name)))
EOF
cat "$RAW/table.md"
log "results in $RAW"
