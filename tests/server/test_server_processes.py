"""The motion server as a process: SIGTERM answers pending requests and removes the connection file, a client
recovers transparently after a restart, and eight processes of mixed requests each get every reply."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from helpers.server import X, spawn, stop

from motioncore.wire import protocol as P
from motioncore.wire.client import Client

pytestmark = pytest.mark.timeout(60)


# ------------------------------------------------------------------- processes: SIGTERM, restart

def test_sigterm_answers_pending_requests_and_removes_the_connection_file(tmp_path):
    conn = tmp_path / "conn.json"
    p, info = spawn(conn, tmp_path / "server.log", "--workers", "1", "--grace", "0.5")
    try:
        with Client(conn) as c:
            running = c.submit("debug.sleep", {"seconds": 60, "steps": 6000})
            while c.health(stats=True)["running"] < 1:
                pass
            queued = c.submit("debug.sleep", {"seconds": 60})
            while c.health(stats=True)["queued"] < 1:
                pass
            p.send_signal(signal.SIGTERM)
            for rid in (queued, running):
                with pytest.raises(P.ShuttingDown):
                    c.result(rid, timeout=10)
        assert p.wait(15) == 0
    finally:
        stop(p)
    assert not conn.exists()
    events = [json.loads(line)["event"] for line in (tmp_path / "server.log").read_text().splitlines()]
    assert events[0] == "listening" and events[-2:] == ["shutting down", "stopped"]


def test_client_recovers_transparently_after_a_server_restart(tmp_path):
    conn = tmp_path / "conn.json"
    log = tmp_path / "server.log"
    p, info = spawn(conn, log)
    try:
        with Client(conn, timeout=3, retries=3) as c:
            assert c.health()["status"] == "ok"
            first = c.server["server_session"]
            p.kill()                                 # no clean shutdown: the connection file stays
            p.wait()
            assert conn.exists()
            p2, info2 = spawn(conn, log)             # same file: same port, a fresh key and session
            try:
                assert info2["endpoint"] == info["endpoint"] and info2["server_session"] != first
                assert c.health()["status"] == "ok"  # no caller action
                assert c.restarts == 1 and c.server["server_session"] == info2["server_session"]
                assert c.pfnn_rollout(X, 0.0).arrays["y"].shape == (1, 311)
                p2.kill()
                p2.wait()
            finally:
                stop(p2)
            # restarted on a new port and key: the first attempt times out, the client re-reads the
            # connection file, reconnects and resends (health is idempotent)
            conn.unlink()
            p3, info3 = spawn(conn, log, "--port", "0")
            try:
                assert info3["endpoint"] != info["endpoint"]
                assert c.health()["status"] == "ok"
                assert c.restarts == 2 and c.resets >= 1
            finally:
                assert stop(p3) == 0
    finally:
        stop(p)


LOAD_WORKER = textwrap.dedent("""
    import json, sys, time, numpy as np, zmq
    from motioncore.wire import protocol as P
    from motioncore.wire.client import read_connection_file, secure_socket
    info = read_connection_file(sys.argv[1]); n = int(sys.argv[2]); seed = int(sys.argv[3])
    codec = P.Codec(info["key"], P.CLIENT_LIMITS)
    ctx = zmq.Context(); s = ctx.socket(zmq.DEALER); s.linger = 0
    secure_socket(s, info["key"])
    s.connect(f"tcp://127.0.0.1:{info['port']}")
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(342).astype(np.float32)
    kinds = [("health", {}, {}), ("pfnn.rollout", {}, {"x": x, "phase": np.float32(0.1)}),
             ("debug.echo", {"k": 1}, {"v": x[:16]}), ("no.such", {}, {}), ("models", {}, {}),
             ("pfnn.rollout", {"frames": 3}, {"x": x, "phase": np.float32(0.2)}),
             ("mann.rollout", {}, {"x": x})]
    sent, finals, lat, bad = {}, {}, [], 0
    i = 0
    while len(finals) < n:
        while i < n and len(sent) - len(finals) < 4:      # keep 4 requests in flight
            t, c, a = kinds[rng.integers(len(kinds))]
            rid = f"{seed}-{i}"; i += 1
            s.send_multipart(codec.encode(t, c, a, id=rid)); sent[rid] = (t, time.perf_counter())
        if not s.poll(20000):
            break
        m = codec.decode(s.recv_multipart())
        if m.parent_id not in sent:
            bad += 1; continue
        if m.is_final:
            if m.parent_id in finals:
                bad += 1
            finals[m.parent_id] = m.type if m.type == "result" else m.content["code"]
            lat.append((time.perf_counter() - sent[m.parent_id][1]) * 1e6)
    print(json.dumps({"sent": len(sent), "finals": len(finals), "bad": bad, "lat_us": lat,
                      "codes": sorted(set(finals.values()))}))
    s.close(); ctx.term()
""")


def run_load(conn: Path, procs: int = 8, n: int = 200) -> dict:
    ps = [subprocess.Popen([sys.executable, "-c", LOAD_WORKER, str(conn), str(n), str(seed)],
                           stdout=subprocess.PIPE, text=True) for seed in range(procs)]
    outs = [json.loads(p.communicate(timeout=120)[0]) for p in ps]
    lat = np.concatenate([o["lat_us"] for o in outs])
    return {"outs": outs, "p50_us": float(np.percentile(lat, 50)), "p99_us": float(np.percentile(lat, 99)),
            "n": int(lat.size)}


def test_load_eight_processes_two_hundred_mixed_requests_each(tmp_path):
    conn = tmp_path / "conn.json"
    p, _ = spawn(conn, tmp_path / "server.log", "--queue", "256")
    try:
        res = run_load(conn)
        with Client(conn) as c:
            h = c.health(stats=True)
    finally:
        assert stop(p) == 0
    for o in res["outs"]:
        assert o["sent"] == o["finals"] == 200 and o["bad"] == 0, o
        assert set(o["codes"]) <= {"result", "unknown_type", "model_unavailable"}, o["codes"]
    assert h["inflight"] == 0 and h["send_failures"] == {"unroutable": 0, "full": 0, "dropped_overflow": 0}
