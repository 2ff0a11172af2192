#!/usr/bin/env python3
"""bench/consistency.py: what the cache's consistency operations cost.

The analogue of the Flex measurements in docs/benchmarks.md: the median latency of a
memory hit, a disk hit, a validation (a 304 from the origin), a miss that is stored,
an injection (admin PUT), and an invalidation (PURGE), with the origin behind a fixed
delay; then the hit ratio and hit throughput when the working set is four times the
memory tier, with the disk tier and without it.

How to run (Weir built with `cargo build --release -p weir`; wrk installed):
    python3 bench/consistency.py                 # 3 rounds of 200 samples, 20 ms origin
    python3 bench/consistency.py --rounds 5 --delay-ms 50

Everything runs on 127.0.0.1 and stops by itself: a Python origin (threads, HTTP/1.1
keep-alive) and Weir started with a temporary configuration and cache directory.
Latencies are measured by one keep-alive client, so they include the client's own
overhead (the "direct" row measures it against the origin without delay).
"""

import argparse
import http.client
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKEN = "bench-token"


class Origin(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    delay = 0.0
    counts = {}
    lock = threading.Lock()

    def log_message(self, *args):
        pass

    def setup(self):
        super().setup()
        # Headers and body are written separately: without this, Nagle's algorithm and
        # the client's delayed ACK add 40 ms to every response with a body.
        import socket

        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def handle(self):
        try:
            super().handle()
        except (BrokenPipeError, ConnectionResetError):
            pass  # wrk closes its connections at the end of a run

    def do_GET(self):
        kind = self.path.split("/")[1]
        with Origin.lock:
            Origin.counts[kind] = Origin.counts.get(kind, 0) + 1
        if kind != "direct":
            time.sleep(Origin.delay)
        size = {"disk": 16384, "ws": 4096}.get(kind, 512)
        etag = '"v1"'
        cc = "max-age=0" if kind == "val" else "max-age=3600"
        if kind == "val" and self.headers.get("If-None-Match") == etag:
            self.send_response(304)
            self.send_header("ETag", etag)
            self.send_header("Cache-Control", cc)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = (self.path.encode() + b"|") * (size // (len(self.path) + 1) + 1)
        body = body[:size]
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Cache-Control", cc)
        self.send_header("ETag", etag)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def free_port():
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Weir:
    def __init__(self, binary, tmp, origin_port, memory, disk):
        self.port, self.admin = free_port(), free_port()
        cache_dir = os.path.join(tmp, "cache-" + str(self.port))
        disk_value = f'{{ path = "{cache_dir}", size = "512MiB" }}' if disk else '"off"'
        config = f"""
[admin]
listen = "127.0.0.1:{self.admin}"
token = "{TOKEN}"
[log]
access = "off"
[cache]
memory = "{memory}"
max_object = "{memory}"
max_memory_object = "8KiB"
disk = {disk_value}
[[listen]]
addr = "127.0.0.1:{self.port}"
mode = "reverse"
origin = "http://127.0.0.1:{origin_port}"
"""
        path = os.path.join(tmp, f"weir-{self.port}.toml")
        with open(path, "w") as f:
            f.write(config)
        self.log = open(os.path.join(tmp, f"weir-{self.port}.log"), "w")
        self.proc = subprocess.Popen(
            [binary, "run", "--config", path], stdout=self.log, stderr=self.log, cwd=tmp
        )
        deadline = time.time() + 15
        while time.time() < deadline:
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.admin, timeout=1)
                c.request("GET", "/healthz")
                if c.getresponse().status == 200:
                    return
            except OSError:
                time.sleep(0.05)
        raise SystemExit("weir did not start; see " + self.log.name)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()

    def metric(self, name, label=None):
        c = http.client.HTTPConnection("127.0.0.1", self.admin, timeout=5)
        c.request("GET", "/metrics")
        total = 0.0
        for line in c.getresponse().read().decode().splitlines():
            if line.startswith(name) and (label is None or label in line):
                rest = line[len(name):]
                if rest[:1] in ("{", " "):
                    total += float(line.rsplit(" ", 1)[1])
        return total

    def cpu_seconds(self):
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(conn, method, path, body=None, headers=None, expect=None):
    start = time.perf_counter_ns()
    conn.request(method, path, body=body, headers=headers or {})
    r = conn.getresponse()
    r.read()
    elapsed = (time.perf_counter_ns() - start) / 1e6
    if expect is not None:
        status = r.getheader("Cache-Status") or ""
        if r.status >= 400 or not expect(r.status, status):
            raise SystemExit(f"{method} {path}: unexpected {r.status} {status!r}")
    return elapsed


def measure(weir, origin_port, samples, round_no):
    host = f"127.0.0.1:{origin_port}"
    conn = http.client.HTTPConnection("127.0.0.1", weir.port, timeout=30)
    admin = http.client.HTTPConnection("127.0.0.1", weir.admin, timeout=30)
    direct = http.client.HTTPConnection("127.0.0.1", origin_port, timeout=30)
    auth = {"Authorization": "Bearer " + TOKEN}
    p = f"r{round_no}"
    hit = lambda s, cs: "hit" in cs.split(";")[1] if ";" in cs else False
    rows = {}
    rows["direct to origin (no delay)"] = [timed(direct, "GET", f"/direct/{p}") for _ in range(samples)]
    timed(conn, "GET", f"/mem/{p}")
    rows["memory hit"] = [timed(conn, "GET", f"/mem/{p}", expect=hit) for _ in range(samples)]
    timed(conn, "GET", f"/disk/{p}")
    deadline = time.time() + 10
    while weir.metric("weir_cache_disk_writes_total") < 1 and time.time() < deadline:
        time.sleep(0.05)
    rows["disk hit (16 KiB, not in memory)"] = [
        timed(conn, "GET", f"/disk/{p}", expect=hit) for _ in range(samples)
    ]
    timed(conn, "GET", f"/val/{p}")
    rows["validation (304 from the origin)"] = [
        timed(conn, "GET", f"/val/{p}", expect=lambda s, cs: "fwd-status=304" in cs)
        for _ in range(samples)
    ]
    rows["miss, stored"] = [
        timed(conn, "GET", f"/miss/{p}/{i}", expect=lambda s, cs: "stored" in cs)
        for i in range(samples)
    ]
    rows["injection (admin PUT, 512 B)"] = [
        timed(
            admin,
            "PUT",
            f"/admin/cache?url=http://{host}/inj/{p}/{i}",
            body=b"x" * 512,
            headers={**auth, "Content-Type": "text/plain", "Cache-Control": "max-age=600"},
            expect=lambda s, cs: s < 300,
        )
        for i in range(samples)
    ]
    for i in range(samples):
        timed(conn, "GET", f"/mem/{p}/purge/{i}")
    rows["invalidation (PURGE)"] = [
        timed(conn, "PURGE", f"/mem/{p}/purge/{i}", expect=lambda s, cs: s == 200)
        for i in range(samples)
    ]
    return {k: statistics.median(v) for k, v in rows.items()}


def working_set(weir, objects, duration, conns):
    """Fills the cache with `objects` objects, then runs wrk over them at random."""

    def fill(start):
        c = http.client.HTTPConnection("127.0.0.1", weir.port, timeout=30)
        for i in range(start, objects, 32):
            c.request("GET", f"/ws/{i}")
            c.getresponse().read()

    threads = [threading.Thread(target=fill, args=(s,)) for s in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    time.sleep(1)
    script = os.path.join(tempfile.gettempdir(), f"ws-{os.getpid()}.lua")
    with open(script, "w") as f:
        f.write(
            "math.randomseed(os.time())\n"
            f'request = function() return wrk.format("GET", "/ws/" .. math.random(0, {objects - 1})) end\n'
        )
    # Memory and disk hits: cache="hit" and cache="disk_hit".
    hits0 = weir.metric("weir_requests_total", 'hit"}')
    all0 = weir.metric("weir_requests_total")
    cpu0 = weir.cpu_seconds()
    out = subprocess.run(
        ["wrk", "-t1", f"-c{conns}", f"-d{duration}", "-s", script, f"http://127.0.0.1:{weir.port}/"],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    cpu = weir.cpu_seconds() - cpu0
    hits = weir.metric("weir_requests_total", 'hit"}') - hits0
    total = weir.metric("weir_requests_total") - all0
    os.unlink(script)
    disk = {
        m: weir.metric("weir_cache_disk_" + m)
        for m in ("entries", "writes_total", "writes_dropped_total", "damaged_total", "write_errors_total")
    }
    rps = float(next(l.split()[1] for l in out.splitlines() if l.startswith("Requests/sec")))
    return {
        "hit_ratio": hits / total if total else 0.0,
        "rps": rps,
        "per_cpu_s": total / cpu if cpu else 0.0,
        "disk": disk,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--weir", default=os.path.join(ROOT, "target/release/weir"))
    ap.add_argument("--delay-ms", type=float, default=20.0)
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--memory", default="16MiB")
    ap.add_argument("--objects", type=int, default=16384, help="working set, 4 KiB objects")
    ap.add_argument("--duration", default="10s")
    ap.add_argument("--conns", type=int, default=32)
    args = ap.parse_args()
    if not os.path.exists(args.weir):
        raise SystemExit(f"{args.weir} not found: cargo build --release -p weir")
    Origin.delay = args.delay_ms / 1000
    server = ThreadingHTTPServer(("127.0.0.1", 0), Origin)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    origin_port = server.server_address[1]
    tmp = tempfile.mkdtemp(prefix="weir-consistency-")
    results = []
    try:
        weir = Weir(args.weir, tmp, origin_port, args.memory, disk=True)
        try:
            for r in range(args.rounds):
                results.append(measure(weir, origin_port, args.samples, r))
        finally:
            weir.stop()
        Origin.delay = args.delay_ms / 1000
        ws = {}
        for disk in (True, False):
            weir = Weir(args.weir, tmp, origin_port, args.memory, disk)
            try:
                ws["with disk tier" if disk else "memory only"] = working_set(
                    weir, args.objects, args.duration, args.conns
                )
            finally:
                weir.stop()
    finally:
        server.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"Origin delay {args.delay_ms:g} ms; medians of {args.samples} samples, "
          f"median of {args.rounds} rounds.\n")
    print("| Operation | median latency (ms) | rounds |")
    print("|---|---|---|")
    for name in results[0]:
        per_round = [r[name] for r in results]
        print(f"| {name} | {statistics.median(per_round):.3f} | "
              + ", ".join(f"{v:.3f}" for v in per_round) + " |")
    ws_bytes = args.objects * 4096
    print(f"\nWorking set: {args.objects} objects of 4 KiB ({ws_bytes >> 20} MiB), memory tier "
          f"{args.memory}; wrk -c{args.conns} -d{args.duration}, uniform random URLs.\n")
    print("| Cache | hit ratio | req/s (wall) | req per CPU-second of Weir |")
    print("|---|---|---|---|")
    for name, r in ws.items():
        print(f"| {name} | {100 * r['hit_ratio']:.1f}% | {r['rps']:.0f} | {r['per_cpu_s']:.0f} |")
    print("\n" + json.dumps({"latency_ms": results, "working_set": ws}))


if __name__ == "__main__":
    sys.exit(main())
