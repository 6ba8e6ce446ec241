"""The motion server on loopback: request types, exactly-one-reply, progress, busy, cancel, batching,
slow and vanished clients, ping, and the docs against the handler table, with the server in a thread of this
process (fast); SIGTERM, restart and load, with a server subprocess, are in test_server_processes.py.
"""
from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import re
import stat
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
import zmq
from helpers.server import Raw, X, thread_server
from motioncore_server.config import ServerConfig
from motioncore_server.handlers import DEBUG_HANDLERS, HANDLERS
from motioncore_server.registry import Loader, Registry, ServedModel, debug_mlp

from motioncore.cli.server import add_subcommands, ping
from motioncore.models.checkpoint import load_state_into, save_model
from motioncore.wire import protocol as P
from motioncore.wire.client import Client, read_connection_file

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(60)


# ----------------------------------------------------------------------------------------- helpers

@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    with thread_server(tmp_path_factory.mktemp("srv"), workers=2) as s:
        yield s


@pytest.fixture
def client(srv):
    with Client(srv.connection_file, timeout=10) as c:
        yield c




# ------------------------------------------------------------------------------------- basics

def test_connection_file_fields_and_mode(srv):
    info = read_connection_file(srv.connection_file)
    assert stat.S_IMODE(srv.connection_file.stat().st_mode) == 0o600
    assert info["ip"] == "127.0.0.1" and info["port"] == srv.port and info["pid"] == os.getpid()
    assert re.fullmatch(r"[0-9a-f]{64}", info["key"]) and info["server_session"] == srv.session
    assert info["signature_scheme"] == "hmac-sha256" and info["transport"] == "tcp"


def test_remote_bind_needs_allow_remote():
    with pytest.raises(ValueError, match="allow-remote"):
        ServerConfig(ip="0.0.0.0")
    assert ServerConfig(ip="::1").ip == "::1"


def test_hello_health_models(client, srv):
    h = client.hello()
    assert h["protocol_version"] == P.PROTOCOL_VERSION == 2 and h["server_session"] == srv.session and h["device"] == "cpu"
    assert h["limits"]["max_message_bytes"] == P.Limits().max_message_bytes
    assert set(h["types"]) == set(HANDLERS) | set(DEBUG_HANDLERS)
    assert {"motioncore", "torch", "numpy", "pyzmq", "libzmq"} <= set(h["versions"]) and h["models"] == ["debug.mlp"]
    lean = client.health()
    assert set(lean) == {"status", "uptime_s", "inflight"} and lean["status"] == "ok" and lean["inflight"] == 0
    health = client.health(stats=True)
    assert health["status"] == "ok" and health["workers"] == 2 and health["queue_capacity"] == 64
    assert {"received", "replied", "rejected", "send_failures", "batches"} <= set(health)
    with pytest.raises(P.InvalidRequest, match="'stats' must be bool"):
        client.call("health", {"stats": "yes"})
    (m,) = client.models()
    assert m["name"] == "debug.mlp" and m["tasks"] == ["pfnn.rollout"] and m["inputs"]["x"] == [342]


def test_unknown_type_internal_error_and_invalid_input_all_answered(client):
    with pytest.raises(P.UnknownType):
        client.call("no.such.type")
    with pytest.raises(P.InternalError, match="on purpose"):
        client.call("debug.fail")
    with pytest.raises(P.InvalidRequest, match="NaN"):
        client.pfnn_rollout(np.full(342, np.nan, np.float32), 0.0)
    with pytest.raises(P.InvalidRequest, match="shape"):
        client.pfnn_rollout(np.zeros(5, np.float32), 0.0)        # the model declares x (342,)
    with pytest.raises(P.InvalidRequest, match="frames"):
        client.pfnn_rollout(X, 0.0, frames=0)
    assert client.health()["status"] == "ok"


def test_rollout_results_and_multi_frame_progress(client):
    ref = debug_mlp().step({"x": X[None], "phase": np.float32([0.5])})
    r = client.pfnn_rollout(X, 0.5)
    np.testing.assert_allclose(r.arrays["y"], ref["y"], rtol=1e-5, atol=1e-5)
    seen = []
    r = client.pfnn_rollout(X, 0.5, frames=20, progress=seen.append)
    assert r.arrays["y"].shape == (20, 311) and r.arrays["phase"].shape == (20,)
    assert seen and seen[-1] == {"done": 20, "total": 20}


PATH = np.float32([[0, 0], [0, 2], [1, 3]])


def test_model_requests_without_a_model_are_model_unavailable(tmp_path):
    T, J = 8, 3
    sk = {"joints": ["hips", "spine", "head"], "parents": [-1, 0, 1]}
    quat = np.tile(np.float32([1, 0, 0, 0]), (T, J, 1))
    with thread_server(tmp_path, debug=False) as s, Client(s.connection_file) as c:
        assert c.hello()["models"] == [] and c.models() == []
        calls = [lambda: c.pfnn_rollout(X, 0.0), lambda: c.mann_rollout(X, frames=3),
                 lambda: c.infill(np.zeros((T, 6)), np.arange(T) % 4 == 0),
                 lambda: c.style_adapt(PATH, rotations=quat, root=np.zeros((T, 3)))]
        for call in calls:
            with pytest.raises(P.ModelUnavailable, match="no model serving"):
                call()
        # ...but their inputs are validated first, per docs/protocol.md
        bad = [lambda: c.infill(np.zeros((T, 6)), np.zeros(T, bool)),
               lambda: c.infill(np.zeros((T, 6)), np.ones(T - 1, bool)),
               lambda: c.style_adapt(PATH, rotations=quat, root=np.zeros((T - 1, 3))),
               lambda: c.style_adapt(PATH, rotations=quat * 2, root=np.zeros((T, 3))),
               lambda: c.style_adapt(PATH),                                          # no exemplar, no z
               lambda: c.style_adapt(PATH, rotations=quat, root=np.zeros((T, 3)), z=np.zeros(4)),
               lambda: c.style_adapt(PATH[:1], z=np.zeros(4)),
               lambda: c.retarget(quat * 2, np.zeros((T, 3)), sk, sk),
               lambda: c.retarget(quat, np.zeros((T, 3)), sk, sk),   # no offsets
               lambda: c.retarget(quat, np.zeros((T, 3)), {"joints": ["a"], "parents": [0]}, sk),
               lambda: c.mann_rollout(np.zeros((2, 3))),
               lambda: c.call("pfnn.rollout", {}, {"x": X, "phase": np.float32(0), "extra": X})]
        for call in bad:
            with pytest.raises(P.InvalidRequest):
                call()
        with pytest.raises(P.UnknownType):
            c.call("debug.sleep", {"seconds": 0})   # debug types only with --debug


def test_docs_list_exactly_the_handler_table():
    doc = (ROOT / "docs" / "protocol.md").read_text()
    public, debug = doc.split("## Request types")[1].split("## Debug-only request types")
    assert set(re.findall(r"^### `([a-z.]+)`", public, re.M)) == set(HANDLERS)
    assert set(re.findall(r"^### `([a-z.]+)`", debug, re.M)) == set(DEBUG_HANDLERS)
    for code in P.ERRORS:
        assert f"`{code}`" in doc, code
    idem = re.search(r"Resend \*\*idempotent\*\* requests under a new id: (.*?)\. Never", doc, re.S).group(1)
    assert set(re.findall(r"`([a-z.]+)`", idem)) == set(P.IDEMPOTENT)


def test_a_client_written_from_the_docs_alone(srv):
    """Only zmq, json and hmac, following docs/protocol.md: no motioncore.wire.protocol or client."""
    info = json.loads(srv.connection_file.read_text())
    key = info["key"].encode("ascii")
    ctx = zmq.Context()
    s = ctx.socket(zmq.DEALER)
    s.linger = 0
    try:
        s.plain_username = b"motioncore"
        s.plain_password = hmac.new(key, b"motioncore zap v2", hashlib.sha256).hexdigest().encode()
        s.connect(f"tcp://{info['ip']}:{info['port']}")
        x = np.arange(342, dtype="<f4").tobytes()
        header = json.dumps({"version": 2, "id": "doc-client-1", "type": "pfnn.rollout", "dir": "req",
                             "session": uuid.uuid4().hex, "seq": 1, "ts": time.time(), "parent_id": None,
                             "server_session": None, "content": {"frames": 1},
                             "buffers": [{"name": "x", "dtype": "float32", "shape": [342]},
                                         {"name": "phase", "dtype": "float32", "shape": []}]}).encode()
        phase = np.float32(0.25).tobytes()
        sig = hmac.new(key, header + x + phase, hashlib.sha256).hexdigest().encode()
        s.send_multipart([b"<MC|MSG>", sig, header, x, phase])
        assert s.poll(10_000)
        delim, rsig, rheader, *bufs = s.recv_multipart()
        assert delim == b"<MC|MSG>"
        assert hmac.compare_digest(rsig, hmac.new(key, rheader + b"".join(bufs), hashlib.sha256).hexdigest().encode())
        h = json.loads(rheader)
        assert h["type"] == "result" and h["parent_id"] == "doc-client-1" and h["server_session"] == info["server_session"]
        assert h["dir"] == "rep" and abs(h["ts"] - time.time()) < 60
        (y, ph) = h["buffers"]
        assert (y["name"], y["dtype"], y["shape"]) == ("y", "float32", [1, 311]) and len(bufs[0]) == 311 * 4
        assert np.frombuffer(bufs[1], "<f4")[0] == pytest.approx(0.35)
    finally:
        s.close()
        ctx.term()


# -------------------------------------------------------------------- exactly one final reply

def test_exactly_one_final_reply_per_request_pipelined(srv):
    raw = Raw(srv.connection_file)
    try:
        kinds = [("health", None, None), ("no.such", None, None), ("debug.fail", None, None),
                 ("pfnn.rollout", {}, {"x": X, "phase": np.float32(0)}), ("debug.echo", {"a": 1}, {"z": X}),
                 ("pfnn.rollout", {}, {"x": X[:3], "phase": np.float32(0)}),
                 ("debug.sleep", {"seconds": 0.05, "steps": 2}, None), ("models", None, None)]
        ids = {raw.send(*kinds[i % len(kinds)]): kinds[i % len(kinds)][0] for i in range(80)}
        finals: Counter[str] = Counter()
        while len(finals) < len(ids):
            m = raw.recv()
            assert m.parent_id in ids and m.server_session == srv.session
            if m.is_final:
                finals[m.parent_id] += 1
        barrier = raw.send("health")   # anything still in the pipe arrives before this reply... or never
        while (m := raw.recv()).parent_id != barrier:
            assert not m.is_final, f"second final reply for {ids.get(m.parent_id)}"
        assert set(finals.values()) == {1}
    finally:
        raw.close()


def test_progress_precedes_final_and_health_answers_during_a_long_job(srv, client):
    raw = Raw(srv.connection_file)
    try:
        rid = raw.send("debug.sleep", {"seconds": 0.4, "steps": 4})
        prog, final = raw.until_final(rid)
        assert final.type == "result" and [p.content["done"] for p in prog][-1] == 4
        assert all(p.type == "progress" and p.content["total"] == 4 for p in prog)
        long = raw.send("debug.sleep", {"seconds": 30, "steps": 3000})
        assert raw.recv().type == "progress"            # it is running on a worker
        t0 = time.perf_counter()
        h = client.health(stats=True)
        assert time.perf_counter() - t0 < 1.0 and h["running"] >= 1
        assert client.cancel(long) == {"id": long, "cancelled": True, "state": "running"}
        _, final = raw.until_final(long)
        assert final.type == "error" and final.content["code"] == "cancelled"
    finally:
        raw.close()


def test_busy_when_queue_full_and_cancel_queued(tmp_path):
    with thread_server(tmp_path, workers=1, queue=1) as s, Client(s.connection_file) as c:
        a = c.submit("debug.sleep", {"seconds": 30, "steps": 3000})
        raw = Raw(s.connection_file)
        try:
            # wait (by polling health, not sleeping) until `a` runs, then fill the one queue slot
            while c.health(stats=True)["running"] < 1:
                pass
            b = raw.send("debug.sleep", {"seconds": 30})
            while c.health(stats=True)["queued"] < 1:
                pass
            t0 = time.perf_counter()
            with pytest.raises(P.Busy):
                c.call("debug.sleep", {"seconds": 1})
            assert time.perf_counter() - t0 < 1.0
            assert c.cancel(b)["state"] == "queued"
            assert raw.until_final(b)[1].content["code"] == "cancelled"
        finally:
            raw.close()
        assert c.cancel(a)["state"] == "running"
        with pytest.raises(P.Cancelled):
            c.result(a)
        assert c.cancel(a) == {"id": a, "cancelled": False, "state": "unknown"}
        st = c.health(stats=True)
        assert st["rejected"]["busy"] == 1 and st["inflight"] == 0


# ------------------------------------------------------------------------------ micro-batching

@pytest.mark.parametrize("batching", [True, False])
def test_micro_batching_matches_single_requests(tmp_path, batching):
    xs = np.random.default_rng(1).standard_normal((8, 342)).astype(np.float32)
    ref = debug_mlp()
    with thread_server(tmp_path, batching=batching, batch_window_ms=200, batch_max=8) as s:
        raw = Raw(s.connection_file)
        try:
            ids = [raw.send("pfnn.rollout", {}, {"x": x, "phase": np.float32(i / 10)}) for i, x in enumerate(xs)]
            got = {}
            while len(got) < len(ids):
                m = raw.recv()
                got[m.parent_id] = m
            for i, rid in enumerate(ids):
                one = ref.step({"x": xs[i:i + 1], "phase": np.float32([i / 10])})
                assert got[rid].type == "result"
                np.testing.assert_allclose(got[rid].arrays["y"], one["y"], rtol=1e-5, atol=1e-5)
                np.testing.assert_allclose(got[rid].arrays["phase"], one["phase"], rtol=1e-6)
        finally:
            raw.close()
        b = s.batcher
        assert b.requests == 8 and (b.largest > 1 if batching else b.largest == 1)


# --------------------------------------------------------------------------------- the registry

def _linear_loader(tensors, meta, device):
    cfg = meta["config"]
    net = torch.nn.Linear(cfg["d_in"], cfg["d_out"])
    load_state_into(net, tensors, meta.get("name", "?"))

    def step(inputs):
        with torch.inference_mode():
            return {"y": net(torch.as_tensor(inputs["x"])).numpy()}
    return ServedModel(meta["name"], meta["kind"], ("mann.rollout",), meta, step=step)


def test_registry_loads_lazily_through_a_registered_loader(tmp_path):
    net = torch.nn.Linear(4, 2)
    meta = {"training_data": "none", "licence": "CC0", "fps": 30, "skeleton": "test", "inputs": {"x": [4]}}
    save_model(tmp_path / "lin", net, "test.linear", {"d_in": 4, "d_out": 2}, {"name": "lin", **meta})
    save_model(tmp_path / "broken", net, "test.linear", {"d_in": 4, "d_out": 2}, {"name": "broken", **meta})
    (tmp_path / "broken.safetensors").write_bytes(b"not safetensors")
    save_model(tmp_path / "alien", net, "alien.kind", {}, {"name": "alien", **meta})
    reg = Registry("cpu", loaders={"test.linear": Loader(("mann.rollout",), _linear_loader)})
    with thread_server(tmp_path, registry=reg, debug=False, models_dirs=[tmp_path]) as s, Client(s.connection_file) as c:
        ms = {m["name"]: m for m in c.models()}
        assert set(ms) == {"alien", "broken", "lin"} and not ms["lin"]["loaded"] and ms["lin"]["fps"] == 30
        assert not ms["alien"]["available"] and "no loader" in ms["alien"]["reason"]
        x = np.float32([1, 2, 3, 4])
        y = c.mann_rollout(x, model="lin").arrays["y"]
        np.testing.assert_allclose(y[0], net(torch.as_tensor(x)).detach().numpy(), rtol=1e-6)
        assert {m["name"]: m["loaded"] for m in c.models()}["lin"]
        with pytest.raises(P.InvalidRequest, match="expects"):
            c.mann_rollout(np.zeros(5, np.float32), model="lin")
        with pytest.raises(P.ModelUnavailable, match="failed to load"):
            c.mann_rollout(x, model="broken")
        with pytest.raises(P.ModelUnavailable, match="does not serve"):
            c.pfnn_rollout(x, 0.0, model="lin")
        with pytest.raises(P.InvalidRequest, match="single frames"):
            c.mann_rollout(x, frames=2, model="lin")


# ------------------------------------------------------------------- slow and vanished clients

def test_vanished_and_slow_clients_do_not_block_others(srv, client):
    before = client.health(stats=True)["send_failures"]
    gone = Raw(srv.connection_file)
    gone.send("debug.sleep", {"seconds": 0.4, "steps": 4})
    assert gone.recv().type == "progress"          # the job runs...
    gone.close()                                   # ...and its client vanishes before the final reply
    slow = Raw(srv.connection_file, RCVHWM=1, RCVBUF=4096)
    try:
        big = {"z": np.zeros(256 << 10, np.uint8)}
        for _ in range(400):                       # never reads its replies
            slow.send("debug.echo", None, big)
        t0 = time.perf_counter()
        for _ in range(20):
            client.health()
        assert time.perf_counter() - t0 < 5
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:         # poll until the vanished client's reply was counted
            f = client.health(stats=True)["send_failures"]
            if f["unroutable"] > before["unroutable"]:
                break
        assert f["unroutable"] > before["unroutable"] and f["dropped_overflow"] == 0, f   # slow: held, not lost
        assert client.pfnn_rollout(X, 0.0).arrays["y"].shape == (1, 311)
    finally:
        slow.close()


def test_wrong_key_and_oversize_requests(tmp_path):
    with thread_server(tmp_path, limits=P.Limits(max_message_bytes=1 << 16, max_buffer_bytes=1 << 15)) as s:
        with Client(s.connection_file) as c:
            c.hello()
            received = c.health(stats=True)["received"]
            with pytest.raises(P.TooLarge):
                c.call("debug.echo", {}, {"z": np.zeros(1 << 16, np.uint8)})   # refused before sending
            assert c.health(stats=True)["received"] == received + 1                     # only the health itself
        raw = Raw(s.connection_file, key="not the key")
        try:
            raw.send("health")
            with pytest.raises(P.SignatureError):
                raw.recv()          # the server's error is signed with the real key: we cannot verify it
        finally:
            raw.close()
        assert s.counts["rej:bad_signature"] == 1


# -------------------------------------------------------------------------------- command line

def test_ping_and_the_subcommands(srv, capsys):
    out = ping(srv.connection_file, n=25)
    assert out["n"] == 25 and 0 < out["p50_us"] <= out["p99_us"] and out["server"]["server_session"] == srv.session
    parser = argparse.ArgumentParser()
    add_subcommands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["ping", "--connection-file", str(srv.connection_file), "-n", "3"])
    assert args.func(args) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["n"] == 3 and set(printed) == {"n", "p50_us", "p99_us", "server"}
    args = parser.parse_args(["ping", "--connection-file", str(srv.connection_file) + ".missing"])
    assert args.func(args) == 2
    args = parser.parse_args(["serve", "--port", "0", "--device", "cpu", "--help"])
    assert args.server_args == ["--port", "0", "--device", "cpu", "--help"]


def test_serve_subcommand_runs_the_server_module():
    code = ("import argparse, sys; from motioncore.cli.server import add_subcommands; p = argparse.ArgumentParser(); "
            "add_subcommands(p.add_subparsers()); a = p.parse_args(sys.argv[1:]); sys.exit(a.func(a))")
    out = subprocess.run([sys.executable, "-c", code, "serve", "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "--allow-remote" in out.stdout and "--models-dir" in out.stdout
