# bench/lib.sh: shell functions shared by the benchmark scripts in bench/.
#
# Sourced, never run. The sourcing script sets `set -euo pipefail` and, before
# calling anything here:
#   BENCH_TAG     prefix of log lines, e.g. "hits"
# and, for bench_cleanup (install it with `trap bench_cleanup EXIT`):
#   TMP           the script's temporary directory (removed unless KEEP_TMP=1)
#   STARTED_PIDS  array of the processes the script started (stopped on exit)
#   WRK_PID       the running wrk, if any (stopped first)
#   RAW           the results directory, once it exists
#   SAVE_LOGS     names of files in $TMP worth keeping in $RAW when not empty
#   KEEP_TMP      1 keeps $TMP
# Nothing here touches a process the script did not start.

log() { printf '[%s] %s\n' "${BENCH_TAG:-bench}" "$*" >&2; }
die() { printf '[%s] error: %s\n' "${BENCH_TAG:-bench}" "$*" >&2; exit 1; }

# size_bytes SIZE: N, Nk or Nm in bytes.
size_bytes() {
    local s="${1,,}"
    case "$s" in
        *[0-9]k) echo $(( ${s%k} * 1024 ));;
        *[0-9]m) echo $(( ${s%m} * 1024 * 1024 ));;
        *[0-9]) echo $(( s ));;
        *) die "bad size '$1' (use N, Nk or Nm)";;
    esac
}

# ensure_tools CMD[:PACKAGE]...: installs with apt-get the packages of the
# commands that are missing (as root, or through sudo). Nothing is installed
# when every command is there.
ensure_tools() {
    local missing=() sudo=() spec cmd pkg
    for spec in "$@"; do
        cmd="${spec%%:*}"; pkg="${spec#*:}"
        command -v "$cmd" >/dev/null 2>&1 || missing+=("$pkg")
    done
    [ "${#missing[@]}" -eq 0 ] && return 0
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || die "need ${missing[*]}: run as root or install them"
        sudo=(sudo)
    fi
    command -v apt-get >/dev/null 2>&1 || die "need ${missing[*]} and apt-get is not available"
    log "installing ${missing[*]}"
    "${sudo[@]}" apt-get update -qq
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
    # The package may start a system nginx on port 80; it is not ours and not
    # used here, but stop it if this install is what started it.
    if [[ " ${missing[*]} " == *" nginx "* ]] && command -v service >/dev/null 2>&1; then
        "${sudo[@]}" service nginx stop >/dev/null 2>&1 || true
    fi
}

# bench_cleanup: the EXIT trap. Stops wrk, then every started process (TERM,
# then KILL after 5 s), keeps the servers' logs with the results, removes $TMP.
bench_cleanup() {
    local rc=$? pid i f
    trap - EXIT INT TERM
    if [ -n "${WRK_PID:-}" ]; then kill -TERM "$WRK_PID" 2>/dev/null || true; wait "$WRK_PID" 2>/dev/null || true; fi
    for pid in ${STARTED_PIDS[@]+"${STARTED_PIDS[@]}"}; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in ${STARTED_PIDS[@]+"${STARTED_PIDS[@]}"}; do
        for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
        wait "$pid" 2>/dev/null || true
    done
    # The servers' own output (errors, panics) is worth keeping with the results.
    if [ -n "${RAW:-}" ] && [ -d "$RAW" ] && [ -n "${TMP:-}" ]; then
        for f in ${SAVE_LOGS:-}; do
            if [ -s "$TMP/$f" ]; then cp "$TMP/$f" "$RAW/$f"; fi
        done
    fi
    if [ -n "${TMP:-}" ] && [ -d "$TMP" ]; then
        if [ "${KEEP_TMP:-0}" = 1 ]; then log "kept $TMP"; else rm -rf "$TMP"; fi
    fi
    exit "$rc"
}

# pick_port: a free 127.0.0.1 TCP port, not among USED_PORTS (" p1 p2 ... ").
# It runs in a subshell (PORT=$(pick_port)), so record each pick yourself:
#   P=$(pick_port); USED_PORTS+="$P "
USED_PORTS="${USED_PORTS:- }"
port_free() {
    local p="$1"
    [[ "$USED_PORTS" == *" $p "* ]] && return 1
    if command -v ss >/dev/null 2>&1; then
        [ -z "$(ss -Hltn "sport = :$p" 2>/dev/null)" ] || return 1
    fi
    # Nothing may answer on it either.
    ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null
}
# Ports are taken below 32768, where Linux's ephemeral range starts: under load the
# proxies' own outgoing connections use thousands of those, and one of them can take a
# port between the check and the bind.
pick_port() {
    local p=$(( 20000 + RANDOM % 12000 ))
    for _ in $(seq 200); do
        if port_free "$p"; then echo "$p"; return 0; fi
        p=$(( p + 1 ))
    done
    die "no free port found"
}

# wait_ready NAME PID PORT: until PORT accepts a connection (10 s at most);
# dies if PID exits first.
wait_ready() {
    local i
    for i in $(seq 100); do
        kill -0 "$2" 2>/dev/null || die "$1 exited at start; see its log (KEEP_TMP=1 keeps $TMP)"
        # A bare connect: a request would reach the origin and log a 403 or 404.
        if (exec 3<>"/dev/tcp/127.0.0.1/$3") 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    die "$1 did not answer on 127.0.0.1:$3"
}

# cpu_snapshot PID...: one "pid ticks sys" line per live pid: utime+stime, then
# stime alone, in clock ticks (all threads of the process).
cpu_snapshot() {
    local pid stat rest
    for pid in "$@"; do
        stat="$(cat "/proc/$pid/stat" 2>/dev/null)" || continue
        rest="${stat##*) }"  # fields from 3 (state) on; comm may hold spaces
        set -- $rest
        echo "$pid $(( ${12} + ${13} )) ${13}"  # fields 14 (utime) and 15 (stime)
    done
}
# cpu_ns_snapshot PID: one "tid ns" line per thread of PID: its CPU time so far in
# nanoseconds (schedstat), for bursts too short for clock ticks (10 ms). cpu_delta
# takes two of them as it takes cpu_snapshot's (only threads in both count: one that
# ended in between took its time with it; a worker's threads live as long as it).
cpu_ns_snapshot() {
    local f ns
    for f in /proc/"$1"/task/*/schedstat; do
        read -r ns _ 2>/dev/null < "$f" || continue
        f="${f%/schedstat}"
        echo "${f##*/} $ns"
    done
}
# cpu_delta SNAP0 SNAP1: ticks used by the pids found in both.
cpu_delta() {
    awk 'NR == FNR { t0[$1] = $2; next } ($1 in t0) { d += $2 - t0[$1] } END { print d + 0 }' \
        <(echo "$1") <(echo "$2")
}
# cpu_delta_sys SNAP0 SNAP1: the system (kernel) part of cpu_delta's ticks.
cpu_delta_sys() {
    awk 'NR == FNR { t0[$1] = $3; next } ($1 in t0) { d += $3 - t0[$1] } END { print d + 0 }' \
        <(echo "$1") <(echo "$2")
}

# machine_info: key=value lines describing the machine, for env.txt.
machine_info() {
    echo "date_utc=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "nproc=$(nproc)"
    echo "cpu=$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
    echo "kernel=$(uname -r)"
    echo "wrk=$(wrk -v 2>&1 | head -n1 | awk '{print $2}')"
}

# warn_if_busy: a warning when the 1-minute load average is 0.5 or more.
warn_if_busy() {
    local load1
    load1="$(cut -d' ' -f1 /proc/loadavg)"
    if awk -v l="$load1" 'BEGIN { exit !(l >= 0.5) }'; then
        log "warning: load average is $load1 before starting; other work on the machine skews the numbers"
    fi
}

# The lua script that makes wrk print one machine-readable line at the end,
# with exact percentiles (write it with `wrk_report_lua >FILE`).
wrk_report_lua() {
    cat <<'EOF'
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "WRKSTAT requests=%.0f duration_us=%.0f bytes=%.0f connect=%.0f read=%.0f write=%.0f timeout=%.0f status=%.0f p50_us=%.0f p99_us=%.0f\n",
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write,
    e.timeout, e.status, latency:percentile(50), latency:percentile(99)))
end
EOF
}

# nginx_conf_head NAME: the top of an nginx.conf for a server of the script's own,
# in the foreground, its pid and error log under $TMP (named NAME).
nginx_conf_head() {
    cat <<EOF
daemon off;
master_process on;
pid $TMP/$1.pid;
error_log $TMP/$1-error.log warn;
EOF
}

# nginx_temp_paths NAME: nginx's temporary directories under $TMP/NAME-temp, for an
# http block (so nothing is written to the system's nginx directories).
nginx_temp_paths() {
    cat <<EOF
    client_body_temp_path $TMP/$1-temp/client;
    proxy_temp_path       $TMP/$1-temp/proxy;
    fastcgi_temp_path     $TMP/$1-temp/fastcgi;
    uwsgi_temp_path       $TMP/$1-temp/uwsgi;
    scgi_temp_path        $TMP/$1-temp/scgi;
EOF
}

# Rung h of the ladders: the user of its htpasswd file, the field its client sends,
# and for rung k a field as long, under a name a hit ignores ("User-Agent" is three
# letters shorter than "Authorization").
ACCESS_USER=bench
ACCESS_PASSWORD=bench-password
ACCESS_CREDENTIALS="Authorization: Basic $(printf '%s:%s' "$ACCESS_USER" "$ACCESS_PASSWORD" | base64)"
LIKE_CREDENTIALS="User-Agent: ${ACCESS_CREDENTIALS#Authorization: }xxx"

# access_settings HTPASSWD: rung h's module settings (bench/ladder-instructions.sh,
# bench/ladder.sh): 20 rules, as a school or office proxy might have, that the
# bench's request (GET http://127.0.0.1:PORT/SIZE from 127.0.0.1, user `bench`) walks
# through to the last, which allows it. None depends on the clock's value: the rules
# with times and days either fail on an earlier condition or span the whole week and
# then fail on the user, so every run does the same work. The credentials stay checked
# longer than a run under valgrind lasts.
access_settings() {
    cat <<TOML
htpasswd = "$1"
credential_ttl = "60m"
[module.groups]
staff = ["ann", "bob"]
pupils = ["carl", "dora"]
[[module.rule]]
action = "deny"
clients = ["10.66.0.0/16", "192.168.77.0/24", "fd00::/8"]
[[module.rule]]
action = "deny"
domains = [".ads.example", "tracker.example", ".doubleclick.example"]
[[module.rule]]
action = "deny"
host_regex = '^(www\.)?(ad|track|pixel)s?\.'
[[module.rule]]
action = "deny"
url_regex = '\.(exe|msi|scr|bat)\$'
[[module.rule]]
action = "deny"
methods = ["TRACE", "TRACK", "DEBUG"]
[[module.rule]]
action = "deny"
ports = ["1-79", "81-442", "444-1023"]
[[module.rule]]
action = "deny"
schemes = ["https"]
ports = [80]
[[module.rule]]
action = "allow"
groups = ["pupils"]
methods = ["GET", "HEAD", "POST"]
ports = ["1024-65535"]
times = ["00:00-24:00"]
days = ["mon-sun"]
[[module.rule]]
action = "deny"
domains = ["social.example", ".video.example"]
times = ["09:00-12:00"]
[[module.rule]]
action = "allow"
users = ["ann", "bob"]
[[module.rule]]
action = "allow"
groups = ["staff"]
[[module.rule]]
action = "deny"
clients = ["169.254.0.0/16"]
[[module.rule]]
action = "deny"
host_regex = '(^|\.)(casino|bet)[a-z]*\.'
[[module.rule]]
action = "deny"
url_regex = '[?&](utm_source|fbclid)='
[[module.rule]]
action = "deny"
methods = ["PUT", "DELETE", "PATCH"]
[[module.rule]]
action = "allow"
clients = ["10.0.0.0/8"]
domains = [".school.example"]
[[module.rule]]
action = "deny"
ports = [25, 465, 587]
[[module.rule]]
action = "deny"
domains = [".onion"]
[[module.rule]]
action = "deny"
clients = ["172.16.0.0/12"]
days = ["mon-fri"]
times = ["22:00-06:00"]
[[module.rule]]
action = "allow"
users = ["bench"]
methods = ["GET", "HEAD"]
TOML
}

# rotated ROUND ITEM...: the items in the order of round ROUND (from 1) when ORDER is
# rotate (round r starts with the r-th item, so no item always runs first), else as
# given; one per line.
rotated() {
    local round="$1"; shift
    local items=("$@") by=0
    [ "${ORDER:-fixed}" = rotate ] && by=$(( (round - 1) % ${#items[@]} ))
    printf '%s\n' "${items[@]:by}" "${items[@]:0:by}"
}
