#!/usr/bin/env bash
# bench/miss-atomics.sh: atomic read-modify-write operations per cache miss, by function.
#
# Runs bench/miss-instructions.sh with callgrind recording how often each instruction
# ran (--dump-instr=yes), finds the binary's instructions that are atomic (a `lock`
# prefix, or `xchg` with memory) with objdump, and counts their executions per miss:
# (count(N2) - count(N1)) / (N2 - N1), as for instructions. An atomic operation costs
# more than its one instruction (it waits for the core's pending stores, and for the
# cache line when another core wrote it last), which an instruction count cannot show.
#
# How to run (needs valgrind, binutils' objdump and python3)
#   BUILD=0 bench/miss-atomics.sh            # totals and the functions that make most
#   TOP=80 WEIR_BIN=path bench/miss-atomics.sh
#
# Environment: TOP (functions listed, default 40), and all of miss-instructions.sh's
# (WEIR_BIN, BUILD, N1, N2, SIZE, MEMORY; PROXY=haproxy counts HAProxy's own binary).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
N1="${N1:-1000}"
N2="${N2:-3000}"
TOP="${TOP:-40}"
command -v objdump >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq binutils; }
TMP="$(mktemp -d /tmp/weir-miss-atomics.XXXXXX)"
trap 'rm -rf "$TMP"' EXIT

N1="$N1" N2="$N2" KEEP="$TMP" CALLGRIND_OPTS="--dump-instr=yes" "$ROOT/bench/miss-instructions.sh" >&2
BIN="$(sed -n 's/^cmd: *\([^ ]*\).*/\1/p' "$TMP/callgrind.$N2" | head -n 1)"
[ -x "$BIN" ] || { echo "miss-atomics: no binary named in the callgrind output" >&2; exit 1; }
objdump -d --no-show-raw-insn "$BIN" |
    awk '/^ *[0-9a-f]+:/ { if ($0 ~ /\tlock |\txchg .*\(/) { a=$1; sub(":", "", a); print a } }' \
    > "$TMP/atomic-addresses"

python3 - "$TMP" "$N1" "$N2" "$TOP" "$BIN" <<'PY'
import collections, re, sys
tmp, n1, n2, top, binary = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
atomic = {int(a, 16) for a in open(f"{tmp}/atomic-addresses")}

def counts(path):
    """Executions of atomic instructions of the binary, by function."""
    names = {"ob": {}, "fn": {}}
    out = collections.Counter()
    fn, addr, ours, after_call = "", 0, False, False

    def name(kind, rest):
        m = re.match(r"\((\d+)\)(?:\s+(.*))?$", rest)
        if not m:
            return rest
        if m.group(2) is not None:
            names[kind][m.group(1)] = m.group(2)
        return names[kind][m.group(1)]

    for line in open(path, errors="replace"):
        c = line[:1]
        if c in "0123456789+-*":
            parts = line.split()
            a = parts[0]
            if a.startswith("0x"):
                addr = int(a, 16)
            elif a[0] in "+-":
                step = int(a[1:], 16) if a[1:].startswith("0x") else int(a[1:])
                addr += step if a[0] == "+" else -step
            if after_call:
                # The cost line of a call: inclusive, not this instruction's own.
                after_call = False
                continue
            if ours and addr in atomic and len(parts) >= 3:
                out[fn] += int(parts[2])
        elif line.startswith("ob="):
            ours = name("ob", line[3:].strip()) == binary
        elif line.startswith("fn="):
            fn = name("fn", line[3:].strip())
        elif line.startswith("calls="):
            after_call = True
        elif line.startswith("cob="):
            name("ob", line[4:].strip())
        elif line.startswith("cfn="):
            name("fn", line[4:].strip())
    return out

first, second = counts(f"{tmp}/callgrind.{n1}"), counts(f"{tmp}/callgrind.{n2}")
per = {k: (second[k] - first[k]) / (n2 - n1) for k in set(first) | set(second)}
print(f"{sum(per.values()):.1f} atomic operations per miss ({binary})")
for fn, n in sorted(per.items(), key=lambda kv: -kv[1])[:top]:
    if n >= 0.5:
        print(f"{n:8.2f}  {fn[:140]}")
PY
