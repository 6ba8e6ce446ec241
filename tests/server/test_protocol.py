"""motioncore.wire.protocol without sockets: round trips, one malformed message per validation step, replay
protection (direction, sessions and counters, timestamps), the crash shapes of the audit (issue 18), and
both JSON codecs (msgspec and the standard library fallback used inside Blender without the wheel)."""
from __future__ import annotations

import ast
import json
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from motioncore_server import checks

from motioncore.wire import jsonwire
from motioncore.wire import protocol as P

ROOT = Path(__file__).resolve().parents[2]
KEY = b"0123456789abcdef" * 4


def codec(**limits) -> P.Codec:
    """A server's codec (decodes requests)."""
    return P.Codec(KEY, P.Limits(**limits), role="server", session="sess0")


def client() -> P.Codec:
    """A client's codec (encodes requests)."""
    return P.Codec(KEY)


@pytest.fixture(params=["msgspec", "stdlib"], autouse=True)
def json_backend(request):
    """Every test runs with the C codec and with the standard-library fallback (Blender without the wheel)."""
    P.use_json(request.param)
    yield request.param
    P.use_json()


def forge(header: dict | bytes, buffers=(), key: bytes = KEY, identity=(b"peer",)) -> list[bytes]:
    """Frames with ``header`` taken as given (not validated) and a correct signature under ``key``."""
    hb = header if isinstance(header, bytes) else json.dumps(header).encode()
    bufs = [bytes(b) for b in buffers]
    return [*identity, P.DELIMITER, P.Codec(key).sign(hb, bufs), hb, *bufs]


def header(**over) -> dict:
    h = {"version": 2, "id": P.new_id(), "type": "debug.echo", "dir": "req", "session": P.new_id(), "seq": 1,
         "ts": time.time(), "parent_id": None, "server_session": None, "content": {}, "buffers": []}
    h.update(over)
    return h


def code_of(frames, c: P.Codec | None = None) -> str:
    with pytest.raises(P.ProtocolError) as ei:
        (c or codec()).decode(frames)
    return ei.value.code


# ------------------------------------------------------------------------------------------ round trips

@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "uint8", "bool"])
@pytest.mark.parametrize("shape", [(), (0,), (5,), (3, 4), (2, 0, 3), (1, 2, 3, 4, 1, 2)])
def test_round_trip_every_dtype_and_shape(dtype, shape):
    rng = np.random.default_rng(0)
    a = (rng.random(shape) * 100).astype(dtype)
    c = codec()
    frames = client().encode("debug.echo", {"n": 3, "s": "é", "nested": {"l": [1, 2.5, None]}}, {"a": a, "b": a.T})
    msg = c.decode([b"peer", *[bytes(f) for f in frames]])
    assert msg.type == "debug.echo" and msg.identity == [b"peer"] and msg.content["s"] == "é"
    for k, ref in (("a", a), ("b", a.T)):
        assert msg.arrays[k].dtype == np.dtype(dtype) and msg.arrays[k].shape == ref.shape
        np.testing.assert_array_equal(msg.arrays[k], ref)
        assert not msg.arrays[k].flags.writeable   # a view of the frame, not a copy


def test_round_trip_big_endian_noncontiguous_and_reply_fields():
    a = np.arange(24, dtype=">f8").reshape(4, 6)[:, ::2]   # big-endian, strided
    server = P.Codec(KEY, session="sess1", role="server")
    req = P.Message("health", "req1")
    msg = client().decode(server.reply(req, P.RESULT, {"ok": True, "v": np.float32(2.5)}, {"a": a}))
    assert msg.parent_id == "req1" and msg.server_session == "sess1" and msg.content == {"ok": True, "v": 2.5}
    np.testing.assert_array_equal(msg.arrays["a"], a)
    assert msg.arrays["a"].dtype == np.dtype("<f8")


def test_encode_refuses_object_dtype_and_nan_content():
    c = codec()
    with pytest.raises(P.DtypeError):
        c.encode("x", arrays={"o": np.array([object()])})
    with pytest.raises(P.DtypeError):
        c.encode("x", arrays={"h": np.zeros(2, np.float16)})
    with pytest.raises(P.InvalidRequest):
        c.encode("x", {"v": float("nan")})


def test_error_content_maps_to_typed_exceptions():
    for code, cls in P.ERRORS.items():
        err = P.error_from_content(cls("boom").to_content(), "p")
        assert type(err) is cls and err.code == code and err.message == "boom" and err.parent_id == "p"
    other = P.error_from_content({"code": "from_the_future", "message": "?"})
    assert type(other) is P.ProtocolError and other.code == "from_the_future"
    assert len(set(P.ERRORS)) == len(P.ERRORS) == 17


# -------------------------------------------------------------------------- step 1: frame count

def test_step1_frames():
    assert code_of([b"peer", b"no delimiter", b"sig", b"{}"]) == "bad_frames"
    assert code_of([b"peer", P.DELIMITER, b"sig-only"]) == "bad_frames"
    assert code_of([b"a", b"b", b"c", b"d", b"e", P.DELIMITER, b"s", b"h"]) == "bad_frames"  # 5 identities
    h = header(buffers=[{"name": f"b{i}", "dtype": "uint8", "shape": [1]} for i in range(17)])
    assert code_of(forge(h, [b"x"] * 17)) == "bad_frames"       # 17 buffers > max_buffers


# ------------------------------------------------------------------------------- step 2: sizes

def test_step2_sizes_before_signature():
    c = codec(max_header_bytes=100, max_buffer_bytes=1000, max_message_bytes=1500)
    assert code_of([b"peer", P.DELIMITER, b"bad sig", b"{" + b" " * 200 + b"}"], c) == "too_large"
    assert code_of([b"peer", P.DELIMITER, b"bad sig", b"{}", b"x" * 1001], c) == "too_large"
    assert code_of([b"peer", P.DELIMITER, b"bad sig", b"{}", b"x" * 800, b"x" * 800], c) == "too_large"
    assert code_of([b"peer", P.DELIMITER, b"bad sig", b"{}", b"x" * 800], c) == "bad_signature"  # within limits


# --------------------------------------------------------------------- step 3: signature, replay

def test_step3_signature_wrong_key_altered_header_altered_buffer():
    good = client().encode("debug.echo", {"a": 1}, {"x": np.arange(4, dtype=np.float32)})
    assert code_of(P.Codec(b"another key").encode("health")) == "bad_signature"
    hdr = bytes(good[2]).replace(b'"a":1', b'"a":2')
    assert code_of([good[0], good[1], hdr, good[3]]) == "bad_signature"
    buf = bytearray(bytes(good[3]))
    buf[0] ^= 1
    assert code_of([good[0], good[1], good[2], bytes(buf)]) == "bad_signature"
    assert code_of([good[0], b"", good[2], good[3]]) == "bad_signature"
    assert code_of([good[0], good[1].upper(), good[2], good[3]]) == "bad_signature"


def test_step3_replay_refused_and_history_bounded():
    c = codec()
    frames = [bytes(f) for f in client().encode("health")]
    c.decode(frames)
    assert code_of(frames, c) == "replayed"
    h = P.SignatureHistory(size=3)
    for s in (b"a", b"b", b"c", b"d"):
        assert h.check_and_add(s)
    assert len(h) == 3 and not h.check_and_add(b"d") and h.check_and_add(b"a")   # "a" was forgotten


# ----------------------------------------------------------------------- step 4: header, version

@pytest.mark.parametrize("raw", [
    b"\xff\xfe not utf-8", b"{not json", b"[1, 2]", b'"a string"', b'{"version": NaN}',
    b"[" * 50_000 + b"]" * 50_000, b'{"version": 1' + b"0" * 5000 + b"}",
])
def test_step4_header_not_a_json_object(raw):
    assert code_of(forge(raw), codec(max_header_bytes=200_000)) == "bad_header"


@pytest.mark.parametrize("over", [
    {"version": "1"}, {"version": True}, {"id": ""}, {"id": "x" * 65}, {"id": "a b"}, {"id": 5},
    {"type": "Hello"}, {"type": ""}, {"type": None}, {"parent_id": 7}, {"server_session": "has space"},
    {"dir": "up"}, {"dir": None}, {"seq": -1}, {"seq": 1.5}, {"seq": True}, {"seq": 2**63}, {"ts": "now"},
    {"ts": None}, {"session": 5}, {"session": "a b"},
    {"content": []}, {"content": None}, {"buffers": {}}, {"buffers": [{"dtype": "uint8", "shape": [1]}]},
    {"buffers": [{"name": "a", "dtype": "uint8", "shape": 1}]},
    {"buffers": [{"name": "a", "dtype": "uint8", "shape": []}, {"name": "a", "dtype": "uint8", "shape": []}]},
])
def test_step4_header_schema(over):
    h = header(**over)
    n = len(h["buffers"]) if isinstance(h["buffers"], list) else 0
    assert code_of(forge(h, [b"x"] * n)) == "bad_header"


def test_step4_missing_fields_and_version():
    for k in ("version", "id", "type", "content", "buffers", "dir", "seq", "ts"):
        h = header()
        del h[k]
        assert code_of(forge(h)) == "bad_header", k
    with pytest.raises(P.VersionError) as ei:
        codec().decode(forge(header(version=1, id="v1msg")))
    assert ei.value.code == "bad_version" and ei.value.parent_id == "v1msg"


# -------------------------------------------------------------------------------- step 5: dtypes

@pytest.mark.parametrize("dtype", ["object", "O", "|O", ">f4", "<f4", "float16", "complex64", "V8", "<U4", "str",
                                   "int8", "uint64", ""])
def test_step5_dtype_allow_list(dtype):
    h = header(buffers=[{"name": "a", "dtype": dtype, "shape": [2]}])
    assert code_of(forge(h, [b"\0" * 8])) == "bad_dtype"


def test_step5_before_step6():
    h = header(buffers=[{"name": "a", "dtype": "object", "shape": [10**12]}])   # wrong dtype AND length
    assert code_of(forge(h, [b"x"])) == "bad_dtype"


# ------------------------------------------------------------------------- step 6: buffer lengths

@pytest.mark.parametrize("shape,nbytes", [
    ([3], 11), ([3], 13), ([0], 4), ([2, 2], 12), ([], 0), ([-1], 4), ([1.0], 4), ([True], 4), (["2"], 8),
    ([1] * 7, 4), ([None], 4),
])
def test_step6_length_and_shape(shape, nbytes):
    h = header(buffers=[{"name": "a", "dtype": "float32", "shape": shape}])
    assert code_of(forge(h, [b"\0" * nbytes])) == "bad_buffer"


def test_step6_buffer_count_and_bool_bytes():
    h = header(buffers=[{"name": "a", "dtype": "uint8", "shape": [1]}])
    assert code_of(forge(h, [])) == "bad_buffer"
    assert code_of(forge(h, [b"x", b"y"])) == "bad_buffer"
    hb = header(buffers=[{"name": "m", "dtype": "bool", "shape": [3]}])
    assert code_of(forge(hb, [b"\x00\x01\x02"])) == "bad_buffer"
    assert codec().decode(forge(header(buffers=hb["buffers"]), [b"\x00\x01\x01"])).arrays["m"].tolist() == [
        False, True, True]


def test_step6_ten_gigabyte_claim_is_arithmetic_not_allocation():
    h = header(buffers=[{"name": "x", "dtype": "float64", "shape": [100_000, 100_000]}])   # 80 GB claimed
    frames = forge(h, [b"\0" * 64])
    tracemalloc.start()
    try:
        with pytest.raises(P.BufferSpecError):
            codec().decode(frames)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, peak


# ------------------------------------------------------------------ step 7: per-request helpers

def test_step7_check_array_and_check_field():
    arrays = codec().decode(client().encode("t", arrays={
        "x": np.zeros((4, 3), np.float32), "bad": np.array([1.0, np.nan], np.float32), "i": np.arange(3)})).arrays
    assert checks.check_array(arrays, "x", shape=(None, 3)).shape == (4, 3)
    for kw, name in [({"shape": (None, 4)}, "x"), ({"shape": (None,)}, "x"), ({"dtypes": ("float64",)}, "x"),
                     ({}, "bad"), ({}, "missing"), ({"max_size": 5}, "x"), ({}, "i")]:
        with pytest.raises(P.InvalidRequest) as ei:
            checks.check_array(arrays, name, **kw)
        assert ei.value.code == "invalid_request" and name in str(ei.value)
    assert checks.check_array(arrays, "bad", finite=False).shape == (2,)
    assert checks.check_array(arrays, "nope", required=False) is None
    c = {"n": 3, "f": 2, "b": True, "s": "a", "inf": 1e400}
    assert checks.check_field(c, "n", int, lo=1, hi=3) == 3 and checks.check_field(c, "f", float) == 2.0
    assert checks.check_field(c, "zz", int, default=7) == 7
    for name, kind, kw in [("n", int, {"hi": 2}), ("b", int, {}), ("s", int, {}), ("zz", int, {}),
                           ("s", str, {"choices": ["b"]}), ("inf", float, {})]:
        with pytest.raises(P.InvalidRequest):
            checks.check_field(c, name, kind, **kw)


# ------------------------------------------------------------------------------- import hygiene

WIRE = ("protocol", "errors", "replay", "jsonwire", "client")


@pytest.mark.parametrize("module", [f"{m}.py" for m in WIRE])
def test_protocol_and_client_import_only_stdlib_numpy_zmq(module):
    tree = ast.parse((ROOT / "src" / "motioncore" / "wire" / module).read_text())
    # msgspec: optional (imported under try, with the standard library as the fallback)
    allowed = set(sys.stdlib_module_names) - {"pickle", "marshal", "shelve"} | {"numpy", "zmq", "__future__", "msgspec"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:   # relative: only the other wire modules
                assert node.level == 1 and (node.module in WIRE or node.module is None
                                            and all(a.name in WIRE for a in node.names)), ast.dump(node)
                continue
            names = [node.module.split(".")[0]]
        else:
            continue
        assert set(names) <= allowed, names


# ------------------------------------------------------------ issue 18: the audit's reproductions

@pytest.mark.parametrize("shape", [[0, 2**63], [2**32, 2**32, 0], [0, 2**62, 2**62], [2**31, 0, 2**31, 0],
                                   [0, 10**30], [2**63 - 1, 0]])
def test_audit_1_zero_size_huge_shapes_are_bad_buffer_not_a_crash(shape):
    """Defect 1: a zero-size shape with a huge dimension and an empty frame passed the length check and
    reshape raised inside the socket loop. Now every dimension and their span are bounded first."""
    for dtype in ("float32", "uint8", "bool"):
        h = header(buffers=[{"name": "a", "dtype": dtype, "shape": shape}])
        assert code_of(forge(h, [b""])) == "bad_buffer"
    ok = codec().decode(forge(header(buffers=[{"name": "a", "dtype": "float32", "shape": [0, 1000]}]), [b""]))
    assert ok.arrays["a"].shape == (0, 1000)


def test_audit_3_a_request_is_accepted_once_however_many_messages_follow():
    """Defect 3: the signature cache (32,768 entries) was the only guard. Now (session, seq) is tracked."""
    c, cl = codec(), client()
    first = [bytes(f) for f in cl.encode("health")]
    c.decode(first)
    for _ in range(40_000):   # more than the old history held
        c.decode(cl.encode("health"))
    assert code_of(first, c) == "replayed"
    assert len(c.guard) == 1   # one session tracked, not 40,000 signatures


def test_audit_3_a_reply_never_passes_as_a_request_nor_a_request_as_a_reply():
    server, cl = codec(), client()
    reply = [bytes(f) for f in server.reply(P.Message("health", "r1"), P.RESULT, {"status": "ok"})]
    assert code_of(reply, codec()) == "replayed"                  # the direction is signed
    request = [bytes(f) for f in cl.encode("health")]
    with pytest.raises(P.ReplayError):
        client().decode(request)


def test_audit_3_old_and_future_timestamps_are_stale_and_sessions_expire():
    assert code_of(forge(header(ts=time.time() - 61))) == "stale"
    assert code_of(forge(header(ts=time.time() + 61))) == "stale"
    g = P.ReplayGuard(window_s=10)
    g.check("s1", 1, 100.0, "m", now=100.0)
    with pytest.raises(P.ReplayError):
        g.check("s1", 1, 100.0, "m", now=105.0)
    g.check("s2", 1, 120.0, "m", now=120.0)   # sweeps s1 (its newest ts is older than the window)
    assert len(g) == 1
    with pytest.raises(P.StaleMessage):   # and every message of s1 is stale by then
        g.check("s1", 1, 100.0, "m", now=120.0)


def test_audit_9_huge_finite_values_are_out_of_range():
    arrays = codec().decode(client().encode("t", arrays={"big": np.array([0.0, 1e308]), "ok": np.ones(3)})).arrays
    with pytest.raises(P.InvalidRequest, match="beyond"):
        checks.check_array(arrays, "big", dtypes=("float64",))
    assert checks.check_array(arrays, "ok", dtypes=("float64",), bound=1.0).shape == (3,)
    with pytest.raises(P.InvalidRequest, match="within"):
        checks.check_field({"v": 1e308}, "v", float)


def test_anonymous_errors_carry_no_session():
    err = codec().error(P.SignatureError("no"), anonymous=True)
    msg = client().decode(err)
    assert msg.server_session is None and b"sess0" not in bytes(err[2])


def test_both_json_codecs_write_the_same_header(json_backend):
    h = {"a": [1, 2.5, None, "é"], "b": {"c": True}}
    assert json.loads(jsonwire.dumps(h)) == h and jsonwire.loads(jsonwire.dumps(h)) == h
    with pytest.raises(ValueError):
        jsonwire.dumps({"v": [1.0, {"w": float("inf")}]})
    assert jsonwire.JSON_BACKEND == json_backend
