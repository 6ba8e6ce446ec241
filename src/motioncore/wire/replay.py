"""Replay protection (protocol step 4b): the signatures of recent replies, and per sender session the highest
``seq`` and newest ``ts`` of requests. Vendored into the Blender add-on with protocol.py."""
from __future__ import annotations

import collections
import time

from .errors import ReplayError, StaleMessage

WINDOW_S = 60.0       # a message's "ts" must lie within this many seconds of the receiver's clock


class SignatureHistory:
    """Bounded set of recently seen signatures (oldest forgotten first), as Jupyter's digest history."""

    def __init__(self, size: int = 1 << 15):
        self.size = size
        self._order: collections.deque[bytes] = collections.deque()
        self._seen: set[bytes] = set()

    def check_and_add(self, sig: bytes) -> bool:
        """False if ``sig`` was seen (a replay); otherwise remember it and return True."""
        if sig in self._seen:
            return False
        self._seen.add(sig)
        self._order.append(sig)
        if len(self._order) > self.size:
            self._seen.discard(self._order.popleft())
        return True

    def __len__(self) -> int:
        return len(self._order)


class ReplayGuard:
    """Server side of step 4b: per sender session, the highest ``seq`` seen and the newest ``ts``.

    A request is accepted only if its ``seq`` is above its session's highest (so each is accepted once,
    however many other messages arrive in between) and its ``ts`` is within ``window_s`` of now. A
    session is forgotten once its newest ``ts`` is older than the window: every message it ever sent is
    then stale, so forgetting it re-opens nothing."""

    def __init__(self, window_s: float = WINDOW_S):
        self.window_s = window_s
        self._last: dict[str, list] = {}   # session -> [highest seq, newest ts]
        self._sweep_at = 0.0

    def check(self, session: str, seq: int, ts: float, msg_id: str, now: float | None = None) -> None:
        now = time.time() if now is None else now
        if not abs(now - ts) <= self.window_s:
            raise StaleMessage(f"message timestamp {ts:.3f} is {now - ts:+.1f} s from this side's clock "
                               f"(window {self.window_s:g} s): an old message, or the clocks differ", parent_id=msg_id)
        last = self._last.get(session)
        if last is None:
            self._last[session] = [seq, ts]
        elif seq <= last[0]:
            raise ReplayError(f"message replayed (session {session} already sent seq {last[0]} >= {seq})",
                              parent_id=msg_id)
        else:
            last[0] = seq
            if ts > last[1]:
                last[1] = ts
        if now >= self._sweep_at:
            self._sweep_at = now + self.window_s / 4
            old = now - self.window_s
            for k in [k for k, v in self._last.items() if v[1] < old]:
                del self._last[k]

    def __len__(self) -> int:
        return len(self._last)
