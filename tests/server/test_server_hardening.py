"""The independent audit of issue 18, each defect reproduced as it was found (loopback only, bounded loops).

1 crash shapes, 2 memory before authentication, 3 replay gaps, 4 untrusted key files, 5 replies lost to a
slow reader, 6 client timeouts (cancel, busy vs down), 7 IPv6 and host names, 8 a second server, 9 huge
finite inputs, 11 leaks to unauthenticated peers.
"""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time

import numpy as np
import pytest
import zmq
from helpers.server import Raw, rss_kb, spawn, stop, thread_server
from motioncore_server.app import Server
from motioncore_server.config import ServerConfig

from motioncore.wire import protocol as P
from motioncore.wire.client import Client, ConnectionFileError, RequestTimeout, check_private_file, read_connection_file

pytestmark = pytest.mark.timeout(120)


def forged(codec: P.Codec, shape, type: str = "health") -> list[bytes]:
    h = {"version": 2, "id": P.new_id(), "type": type, "dir": "req", "session": P.new_id(), "seq": 1,
         "ts": time.time(), "parent_id": None, "server_session": None, "content": {},
         "buffers": [{"name": "a", "dtype": "float32", "shape": shape}]}
    hb = json.dumps(h).encode()
    return [P.DELIMITER, codec.sign(hb, [b""]), hb, b""]


def test_crash_shapes_are_answered_and_the_server_lives(tmp_path):
    """The audit killed the server 100 times with one signed message each; now each is bad_buffer."""
    conn = tmp_path / "conn.json"
    p, _ = spawn(conn, tmp_path / "server.log")
    try:
        raw = Raw(conn)
        try:
            for i in range(100):
                shape = [[0, 2**63], [2**32, 2**32, 0]][i % 2]
                raw.sock.send_multipart(forged(raw.codec, shape, ["health", "pfnn.rollout"][i % 2]))
                reply = raw.recv(10)
                assert reply.type == "error" and reply.content["code"] == "bad_buffer", reply.content
        finally:
            raw.close()
        assert p.poll() is None
        with Client(conn, timeout=10) as c:
            assert c.health()["status"] == "ok"
    finally:
        assert stop(p) == 0


def test_an_unexpected_exception_in_the_loop_is_an_internal_reply(tmp_path, monkeypatch):
    with thread_server(tmp_path) as s:
        def boom(frames):
            raise RuntimeError("injected")
        monkeypatch.setattr(s.codec, "decode", boom)
        raw = Raw(s.connection_file)
        try:
            raw.send("health")
            m = raw.recv(10)
            assert m.type == "error" and m.content["code"] == "internal" and m.server_session is None
        finally:
            raw.close()
        monkeypatch.undo()
        with Client(s.connection_file) as c:
            assert c.health(stats=True)["rejected"]["internal"] == 1


def test_unauthenticated_peers_cost_nothing(tmp_path):
    """Defect 2: 3 unauthenticated messages of 37 frames of 32 MiB took RSS from 243 to 3,826 MiB. Now a
    connection without the key's token is refused by ZAP before any frame is read (here 3 x 37 x 8 MiB,
    zero-copy from one buffer on our side)."""
    conn = tmp_path / "conn.json"
    p, _ = spawn(conn, tmp_path / "server.log")
    ctx = zmq.Context()
    try:
        before = rss_kb(p.pid)
        info = read_connection_file(conn)
        s = ctx.socket(zmq.DEALER)
        s.linger = 0
        s.plain_username, s.plain_password = P.ZAP_USERNAME, b"guess"
        s.connect(f"tcp://127.0.0.1:{info['port']}")
        chunk = zmq.Frame(b"\0" * (8 << 20))
        for _ in range(3):
            try:
                s.send_multipart([P.DELIMITER, b"0" * 64, b"{}", *[chunk] * 37], flags=zmq.NOBLOCK, copy=False)
            except zmq.Again:
                pass
        time.sleep(1.0)   # give a (wrongly) accepting server the time to buffer it all
        with Client(conn, timeout=10) as c:
            st = c.health(stats=True)
        grown = (rss_kb(p.pid) - before) / 1024
        assert st["connections_refused"] >= 1 and grown < 20, (st, grown)
        s.close()
        # an authenticated peer sending too many frames is cut off at the frame cap, not buffered twice
        raw = Raw(conn)
        try:
            raw.sock.send_multipart([*raw.codec.encode("health"), *[b"\0" * 1024] * 100])
            assert raw.recv(10).content["code"] == "bad_frames"
        finally:
            raw.close()
    finally:
        ctx.term()
        assert stop(p) == 0


def test_a_restarted_server_has_a_fresh_key_so_a_capture_is_refused(tmp_path):
    conn = tmp_path / "conn.json"
    p, _ = spawn(conn, tmp_path / "server.log")
    key1 = read_connection_file(conn)["key"]
    captured = [bytes(f) for f in P.Codec(key1).encode("health")]
    p.kill()
    p.wait()
    p.stdout.close()
    p2, _ = spawn(conn, tmp_path / "server.log")
    try:
        info = read_connection_file(conn)
        assert info["key"] != key1
        raw = Raw(conn)
        try:
            raw.sock.send_multipart(captured)
            assert raw.recv().content["code"] == "bad_signature"
        finally:
            raw.close()
    finally:
        assert stop(p2) == 0


def test_replayed_request_and_reflected_reply_over_the_wire(tmp_path):
    with thread_server(tmp_path) as s:
        raw = Raw(s.connection_file)
        try:
            frames = [bytes(f) for f in raw.codec.encode("health")]
            raw.sock.send_multipart(frames)
            first = raw.recv()
            assert first.type == "result"
            for _ in range(50):
                raw.send("health")
                raw.recv()
            raw.sock.send_multipart(frames)
            assert raw.recv().content["code"] == "replayed"
            raw.sock.send_multipart(s.codec.reply(first, P.RESULT, {"status": "ok"}))   # a server reply, reflected
            assert raw.recv().content["code"] == "replayed"
        finally:
            raw.close()


@pytest.mark.parametrize("case", ["0644", "0660", "planted"])
def test_an_untrusted_connection_file_is_refused_with_the_fix(tmp_path, case):
    conn = tmp_path / "conn.json"
    conn.write_text(json.dumps({"transport": "tcp", "ip": "127.0.0.1", "port": 1, "key": "k" * 64,
                                "signature_scheme": "hmac-sha256", "server_session": "x", "pid": 1}))
    if case == "planted":
        conn.chmod(0o600)
        with pytest.raises(ConnectionFileError, match="not to this user"):
            check_private_file(conn, uid=os.getuid() + 1)   # as seen by another user than the owner
        if os.getuid() == 0:   # as root we can plant it for real: owned by nobody
            os.chown(conn, 65534, 65534)
        else:
            return
    else:
        conn.chmod(int(case, 8))
    with pytest.raises(ConnectionFileError) as ei:
        read_connection_file(conn)
    assert ("chmod 600" in str(ei.value)) if case != "planted" else ("rm " in str(ei.value))
    with pytest.raises(ConnectionFileError):
        Server(ServerConfig(port=0, connection_file=conn, bundled=False)).start()


def test_four_hundred_pipelined_requests_to_a_slow_reader_all_answered(tmp_path):
    """Defect 5: 150 of 400 replies were dropped. Here the send limit is lowered to 20 so the queue is
    full most of the time; the client reads nothing until all 400 are sent, then slowly."""
    with thread_server(tmp_path, send_hwm=20, queue=1000) as s:
        slow = Raw(s.connection_file, RCVHWM=1, RCVBUF=4096)
        try:
            ids = {slow.send("debug.echo", None, {"z": np.zeros(16 << 10, np.uint8)}) for _ in range(400)}
            finals: dict[str, str] = {}
            deadline = time.monotonic() + 60
            while len(finals) < 400 and time.monotonic() < deadline:
                m = slow.recv(10)
                if m.is_final:
                    assert m.parent_id not in finals, "duplicate reply"
                    finals[m.parent_id] = m.type
                time.sleep(0.0005)
            assert set(finals) == ids and set(finals.values()) == {"result"}
        finally:
            slow.close()
        with Client(s.connection_file) as c:
            st = c.health(stats=True)
        assert st["held_total"] > 0 and st["send_failures"]["dropped_overflow"] == 0 and st["held"] == 0, st


def test_a_timed_out_request_is_cancelled_and_busy_is_told_from_down(tmp_path):
    copy = tmp_path / "copy.json"
    with thread_server(tmp_path, workers=1) as s:
        copy.write_bytes(s.connection_file.read_bytes())
        copy.chmod(0o600)
        with Client(s.connection_file, timeout=0.3, retries=2) as c:
            blocker = c.submit("debug.sleep", {"seconds": 3.0, "steps": 30})
            with pytest.raises(RequestTimeout, match="busy") as ei:
                c.call("debug.sleep", {"seconds": 0.01, "steps": 1}, idempotent=True)
            assert ei.value.busy
            h = c.health(stats=True)
            assert h["inflight"] == 1, h      # only the blocker: no copies queued behind it
            c.cancel(blocker)
    with Client(copy, timeout=0.3, retries=1) as c2:   # the server has stopped: down
        with pytest.raises(RequestTimeout, match="running\\?") as ei:
            c2.health()
        assert not ei.value.busy


@pytest.mark.parametrize("ip", ["::1", "localhost"])
def test_ipv6_and_host_names(tmp_path, ip):
    with thread_server(tmp_path, ip=ip) as s:
        info = read_connection_file(s.connection_file)
        assert info["ip"] in ("127.0.0.1", "::1")
        with Client(s.connection_file) as c:
            assert c.health()["status"] == "ok"


def test_a_second_server_refuses_a_file_that_names_a_live_one(tmp_path):
    conn = tmp_path / "conn.json"
    p, info = spawn(conn, tmp_path / "server.log")
    try:
        before = conn.read_bytes()
        r = subprocess.run([sys.executable, "-m", "motioncore_server", "--connection-file", str(conn), "--port", "0",
                            "--no-bundled"], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and "live server" in r.stderr, r.stderr[-2000:]
        assert conn.read_bytes() == before
        with Client(conn, timeout=10) as c:
            assert c.health()["status"] == "ok"
    finally:
        assert stop(p) == 0


def test_huge_finite_inputs_are_invalid_and_no_nan_leaves(tmp_path):
    from motioncore_server.handlers import Result
    from motioncore_server.workers import check_finite

    conn = tmp_path / "conn.json"
    p, _ = spawn(conn, tmp_path / "server.log")
    try:
        with Client(conn, timeout=60) as c:
            pts = np.stack([np.linspace(0, 3, 8), np.zeros(8)], 1)
            for arrays in ({"points": np.full((8, 2), 1e308)}, {"points": pts, "speed": np.full(8, 1e308)},
                           {"points": pts, "facing": np.full(8, -1e300)}):
                with pytest.raises(P.InvalidRequest):
                    c.call("pfnn.rollout", {"frames": 10}, arrays)
            sk = {"joints": ["a", "b"], "parents": [-1, 0], "offsets": [[0, 0, 0], [0, 1e308, 0]]}
            with pytest.raises(P.InvalidRequest):
                c.retarget(np.tile([1.0, 0, 0, 0], (2, 2, 1)), np.zeros((2, 3)), sk, sk)
            assert c.health()["status"] == "ok"
    finally:
        assert stop(p) == 0
    with pytest.raises(P.InternalError, match="NaN"):
        check_finite(Result({}, {"y": np.array([1.0, np.inf], np.float32)}))


def test_remote_bind_warns(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="motioncore_server"):
        with thread_server(tmp_path, ip="0.0.0.0", allow_remote=True):
            pass
    assert any("non-loopback" in r.getMessage() for r in caplog.records)
