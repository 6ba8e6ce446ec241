"""Benchmark: `health` round trips through the motion server vs a bare pyzmq ROUTER/DEALER echo of the
same message sizes, in the same run; then single-frame `pfnn.rollout` under 8 concurrent client
processes with micro-batching on and off.

Both servers run as subprocesses; the client side is this process. Latency blocks alternate
(echo, server, client-API, echo, ...) so drifts in this VM's speed hit all three alike. Prints a
Markdown table with the date and machine. Never asserts timings.

Usage: .venv/bin/python bench/server_latency.py [--n 3000] [--blocks 10] [--procs 8] [--seconds 3]
       [--rounds 4] [--hidden 512 2048]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import zmq

from motioncore.wire import protocol as P
from motioncore.wire.client import Client, read_connection_file, secure_socket

ECHO = textwrap.dedent("""
    import sys, zmq
    reply = [b"x" * int(n) for n in sys.argv[1].split(",")]
    ctx = zmq.Context(); s = ctx.socket(zmq.ROUTER); port = s.bind_to_random_port("tcp://127.0.0.1")
    print(port, flush=True)
    while True:
        frames = s.recv_multipart(copy=False)
        s.send_multipart([frames[0], *reply])
""")

# The protocol's floor: the same signed JSON messages, decoded and answered by a bare loop (no poller,
# no handler table, no workers). What a server built on motioncore.wire.protocol cannot go below.
PROTO_ECHO = textwrap.dedent("""
    import sys, zmq
    from motioncore.wire import protocol as P
    codec = P.Codec(sys.argv[1], P.Limits(), session="0" * 32, role="server")
    ctx = zmq.Context(); s = ctx.socket(zmq.ROUTER); port = s.bind_to_random_port("tcp://127.0.0.1")
    print(port, flush=True)
    while True:
        m = codec.decode(s.recv_multipart())
        s.send_multipart([*m.identity, *codec.reply(m, "result", {"status": "ok", "uptime_s": 0.0, "inflight": 0})])
""")

ROLLOUT_CLIENT = textwrap.dedent("""
    import json, sys, time, numpy as np
    from motioncore.wire.client import Client
    conn, seconds = sys.argv[1], float(sys.argv[2])
    x = np.random.default_rng(int(sys.argv[3])).standard_normal(342).astype(np.float32)
    with Client(conn) as c:
        c.hello()
        sys.stdout.write("ready\\n"); sys.stdout.flush(); sys.stdin.readline()
        lat, end = [], time.perf_counter() + seconds
        while time.perf_counter() < end:
            t = time.perf_counter_ns(); c.pfnn_rollout(x, 0.3); lat.append((time.perf_counter_ns() - t) / 1e3)
    print(json.dumps(lat))
""")


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{cpu}, {os.cpu_count()} cores, CPU only (no GPU), Python {platform.python_version()}, "
            f"pyzmq {zmq.__version__}, libzmq {zmq.zmq_version()}")


def start_server(conn: Path, *args: str) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-m", "motioncore_server", "--connection-file", str(conn), "--debug",
                          "--log-level", "warning", *args], stdout=subprocess.PIPE, text=True)
    if not p.stdout.readline():
        raise RuntimeError("server did not start")
    return p


def stop(p: subprocess.Popen) -> None:
    p.terminate()
    p.wait(15)
    p.stdout.close()


def pct(a: list[float]) -> tuple[float, float]:
    return float(np.percentile(a, 50)), float(np.percentile(a, 99))


def latency(conn: Path, n: int, blocks: int) -> dict[str, list[float]]:
    info = read_connection_file(conn)
    codec = P.Codec(info["key"], P.CLIENT_LIMITS)
    ctx = zmq.Context()
    srv = secure_socket(ctx.socket(zmq.DEALER), info["key"])
    srv.connect(f"tcp://127.0.0.1:{info['port']}")
    # sizes of a real health request and reply, for the echo baseline
    req = codec.encode("health")
    srv.send_multipart(req)
    rep = srv.recv_multipart()
    sizes = ",".join(str(len(f)) for f in rep)
    echo_p = subprocess.Popen([sys.executable, "-c", ECHO, sizes], stdout=subprocess.PIPE, text=True)
    echo = ctx.socket(zmq.DEALER)
    echo.connect(f"tcp://127.0.0.1:{int(echo_p.stdout.readline())}")
    req_bytes = [bytes(f) for f in req]
    client = Client(conn)
    client.hello()
    floor_p = subprocess.Popen([sys.executable, "-c", PROTO_ECHO, info["key"]], stdout=subprocess.PIPE, text=True)
    floor = ctx.socket(zmq.DEALER)
    floor.connect(f"tcp://127.0.0.1:{int(floor_p.stdout.readline())}")

    def t_echo() -> float:
        t = time.perf_counter_ns()
        echo.send_multipart(req_bytes)
        echo.recv_multipart()
        return (time.perf_counter_ns() - t) / 1e3

    def t_server() -> float:   # the protocol by hand: encode, sign, send, receive, verify, decode
        t = time.perf_counter_ns()
        srv.send_multipart(codec.encode("health"))
        codec.decode(srv.recv_multipart(copy=False))
        return (time.perf_counter_ns() - t) / 1e3

    def t_floor() -> float:    # the protocol by hand against the bare protocol loop
        t = time.perf_counter_ns()
        floor.send_multipart(codec.encode("health"))
        codec.decode(floor.recv_multipart())
        return (time.perf_counter_ns() - t) / 1e3

    def t_client() -> float:   # motioncore.wire.client.Client.health()
        t = time.perf_counter_ns()
        client.health()
        return (time.perf_counter_ns() - t) / 1e3

    out: dict[str, list[float]] = {"echo": [], "floor": [], "server": [], "client": []}
    try:
        for f in (t_echo, t_floor, t_server, t_client):   # warm-up
            for _ in range(200):
                f()
        for _ in range(blocks):
            for name, f in (("echo", t_echo), ("floor", t_floor), ("server", t_server), ("client", t_client)):
                out[name] += [f() for _ in range(n // blocks)]
    finally:
        client.close()
        srv.close(linger=0)
        echo.close(linger=0)
        floor.close(linger=0)
        ctx.term()
        for pp in (echo_p, floor_p):
            pp.kill()
            pp.wait()
            pp.stdout.close()
    return out


def rollouts(conn: Path, procs: int, seconds: float) -> tuple[list[float], dict]:
    ps = [subprocess.Popen([sys.executable, "-c", ROLLOUT_CLIENT, str(conn), str(seconds), str(i)],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for i in range(procs)]
    for p in ps:
        assert p.stdout.readline().strip() == "ready"
    for p in ps:   # start together
        p.stdin.write("go\n")
        p.stdin.flush()
    lat = []
    for p in ps:
        out, _ = p.communicate(timeout=seconds + 60)
        lat += json.loads(out)
    with Client(conn) as c:
        h = c.health(stats=True)
    return lat, h


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=3000, help="round trips per method (default 3000)")
    ap.add_argument("--blocks", type=int, default=10, help="alternating blocks (default 10)")
    ap.add_argument("--procs", type=int, default=8, help="rollout client processes (default 8)")
    ap.add_argument("--seconds", type=float, default=3.0, help="rollout run length (default 3 s)")
    ap.add_argument("--rounds", type=int, default=4, help="alternating runs per setting (default 4)")
    ap.add_argument("--hidden", type=int, nargs="+", default=[512, 2048], help="debug.mlp widths (default 512 2048)")
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        conn = Path(tmp) / "bench.json"
        p = start_server(conn)
        try:
            lat = latency(conn, a.n, a.blocks)
        finally:
            stop(p)
        e50, e99 = pct(lat["echo"])
        for name, label in (("echo", "bare pyzmq ROUTER/DEALER echo, same sizes"),
                            ("floor", "protocol floor: signed JSON decoded and answered by a bare loop"),
                            ("server", "`health` via motioncore server (protocol by hand)"),
                            ("client", "`health` via `motioncore.wire.client.Client`")):
            p50, p99 = pct(lat[name])
            rows.append((label, len(lat[name]), p50, p99, p50 / e50, p99 / e99))
        roll = []
        for hidden in a.hidden:   # both servers up at once; runs alternate on, off, on, off ...
            conns = {b: Path(tmp) / f"roll-{hidden}-{b}.json" for b in (True, False)}
            servers = [start_server(conns[b], "--debug-hidden", str(hidden), *(() if b else ("--no-batching",)))
                       for b in (True, False)]
            try:
                runs: dict[bool, list] = {True: [], False: []}
                for _ in range(a.rounds):
                    for b in (True, False):
                        runs[b].append(rollouts(conns[b], a.procs, a.seconds))
            finally:
                for p in servers:
                    stop(p)
            for b in (True, False):
                rates = [len(r) / a.seconds for r, _ in runs[b]]
                lat = [x for r, _ in runs[b] for x in r]
                h = runs[b][-1][1]
                roll.append((hidden, b, rates, lat, h))
            ratios = [len(on[0]) / max(1, len(off[0])) for on, off in zip(runs[True], runs[False], strict=True)]
            roll[-2] = (*roll[-2], float(np.median(ratios)))
            roll[-1] = (*roll[-1], 1.0)

    today = datetime.date.today().isoformat()
    print(f"## Server latency: `bench/server_latency.py` ({today})\n\nMachine: {machine()}.\n")
    print("| round trip | n | p50 (us) | p99 (us) | p50 vs echo | p99 vs echo |\n|---|---:|---:|---:|---:|---:|")
    for label, n, p50, p99, r50, r99 in rows:
        print(f"| {label} | {n} | {p50:.0f} | {p99:.0f} | {r50:.2f}x | {r99:.2f}x |")
    print(f"\nSingle-frame `pfnn.rollout` on debug.mlp 342-H-H-311: {a.procs} client processes, each one request "
          f"at a time; {a.rounds} alternating runs of {a.seconds:g} s per setting (median req/s, pooled latencies):\n")
    print("| H | micro-batching | req/s (median) | runs (req/s) | on/off per run (median) | p50 (us) | p99 (us) "
          "| mean batch | largest |\n|---:|---|---:|---|---:|---:|---:|---:|---:|")
    for hidden, batching, rates, lat, h, ratio in roll:
        p50, p99 = pct(lat)
        mean = h["batched_requests"] / max(1, h["batches"])
        print(f"| {hidden} | {'on' if batching else 'off'} | {np.median(rates):.0f} | "
              f"{', '.join(f'{r:.0f}' for r in rates)} | {ratio:.2f}x | {p50:.0f} | {p99:.0f} | {mean:.1f} | "
              f"{h['largest_batch']} |")

if __name__ == "__main__":
    main()
