"""The socket loop's traffic with peers on the ROUTER socket, below routing: who may connect (``serve_zap``), how
much one message may cost to read (``recv_bounded``), and how replies reach a slow peer (``Replies``).

Admission (issue 18): a ZAP handler admits only connections that present the ZMTP PLAIN token derived from the
key, so a peer without the key never gets a message in (libzmq would otherwise buffer a whole multipart message
of any frame count before the loop sees it). Messages are read frame by frame with caps on frame count and total
size; the rest of an oversize message is discarded as it is read.

Sends are non-blocking with ROUTER_MANDATORY. A vanished client (EHOSTUNREACH) costs a counted, dropped
reply. A slow client whose queue is full (EAGAIN at the high-water mark, SEND_HWM messages) never blocks
anyone else and loses nothing: its replies are held, in order, and sent as it reads; while HOLD_MAX are
held for it, its new requests are answered ``busy`` (held too; the loop in ``app`` decides that). Only past
HOLD_HARD held messages -- a peer that sends without ever reading -- are replies dropped, counted and logged.
"""
from __future__ import annotations

import collections
import hmac
import logging
from collections import Counter
from typing import Any

import zmq

from motioncore.wire.protocol import ZAP_USERNAME, FrameError, Limits, TooLarge

log = logging.getLogger("motioncore_server")
HOLD_MAX = 1000   # replies held for one slow peer beyond SEND_HWM before its new requests are answered busy
HOLD_HARD = 100_000   # held replies for one peer beyond which replies are dropped (counted, logged)
COPY = False
DRAIN = 256   # messages taken from one socket per loop turn, so neither direction starves the other
ZAP_ENDPOINT = "inproc://zeromq.zap.01"


class TooManyFrames(FrameError):
    def __init__(self, n: int):
        super().__init__(f"message has {n} frames or more; the rest was discarded")


def serve_zap(zap: zmq.Socket, token: bytes, counts: Counter[str]) -> None:
    """ZAP (RFC 27): admit a connection only with the PLAIN user name and the token derived from the key."""
    for _ in range(DRAIN):
        try:
            req = zap.recv_multipart(zmq.NOBLOCK)
        except zmq.Again:
            return
        rid = req[1] if len(req) > 1 else b""
        ok = (len(req) == 8 and req[5] == b"PLAIN" and hmac.compare_digest(req[6], ZAP_USERNAME)
              and hmac.compare_digest(req[7], token))
        if not ok:
            counts["zap_refused"] += 1
        zap.send_multipart([b"1.0", rid, b"200" if ok else b"400", b"OK" if ok else b"bad credentials",
                            b"", b""])


def recv_bounded(router: zmq.Socket, lim: Limits) -> list[Any]:
    """One message, frame by frame (bytes: cheaper than zmq.Frame for the small frames of most requests).
    Past the frame-count or total-size cap the rest is read and discarded, and a placeholder is
    returned that decodes to ``bad_frames`` / ``too_large``: what one message costs us stays bounded."""
    max_frames = lim.max_identities + 3 + lim.max_buffers
    max_total = lim.max_message_bytes + 2 * lim.max_header_bytes
    frames = [router.recv(zmq.NOBLOCK)]
    total, n = len(frames[0]), 1
    while router.get(zmq.RCVMORE):
        keep = total <= max_total and n < max_frames
        f = router.recv(copy=keep)
        n += 1
        if not keep or n > max_frames:
            continue    # discarded (a zmq.Frame, freed at once)
        frames.append(f)
        total += len(f)
    if n > max_frames:
        return [frames[0], TooManyFrames(n)]
    if total > max_total:
        return [frames[0], TooLarge(f"message is over {max_total} bytes; the rest was discarded")]
    return frames


class Replies:
    """Sends on the ROUTER for the loop's thread: now, or held in order per peer (``held``) while its queue is full."""

    def __init__(self, router: zmq.Socket, counts: Counter[str]):
        self.router = router
        self.counts = counts   # the server's counters, shared
        self.held: dict[tuple[bytes, ...], collections.deque] = {}   # peer -> replies waiting for room

    def send(self, identity: list[bytes], frames: list[Any]) -> bool:
        """Send now, or hold (in order) while the peer's queue is full; False when the peer has gone."""
        peer = tuple(identity)
        held = self.held.get(peer) if self.held else None
        if held is not None:
            return self._hold(held, frames)
        try:
            self.router.send_multipart([*identity, *frames], flags=zmq.NOBLOCK, copy=COPY)
            return True
        except zmq.Again:
            self.counts["full"] += 1          # the peer's queue is at the high-water mark: hold
            held = self.held[peer] = collections.deque()
            return self._hold(held, frames)
        except zmq.ZMQError as e:
            if e.errno != zmq.EHOSTUNREACH:
                raise
            self.counts["unroutable"] += 1    # the peer has gone
        return False

    def _hold(self, held: collections.deque, frames: list[Any]) -> bool:
        if len(held) >= HOLD_HARD:
            self.counts["dropped_overflow"] += 1
            if self.counts["dropped_overflow"] % 1000 == 1:
                log.warning("reply dropped: a client sends without reading", extra={"fields": {
                    "held": len(held), "dropped_overflow": self.counts["dropped_overflow"]}})
            return False
        held.append(frames)
        self.counts["held"] += 1
        return True

    def flush(self) -> None:
        """Send held replies, oldest first, while each peer has room; forget peers that have gone."""
        for peer, held in list(self.held.items()):
            try:
                while held:
                    self.router.send_multipart([*peer, *held[0]], flags=zmq.NOBLOCK, copy=COPY)
                    held.popleft()
            except zmq.Again:
                continue
            except zmq.ZMQError as e:
                if e.errno != zmq.EHOSTUNREACH:
                    raise
                self.counts["unroutable"] += len(held)
                held.clear()
            del self.held[peer]
