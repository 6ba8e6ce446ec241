"""The any-order transformer as an in-filling family (``AnyOrderFamily``, ``models.kinds``: ``anyorder``): a clip
sampled in one window, or gap by gap in windows of up to ``core.gaps.CONTEXT`` frames either side when it is longer
than ``Request.window``; and the filler of a retarget's unmapped joints (``fill_joints``, ``tasks.joints``).

The model was trained on LaFAN1-style windows (facing +Z at the last context frame, centred on the mean ground
position of the root). A window is moved the same way before sampling and back after: the yaw comes from the last
frame of the first run of frames with the root and the facing joints' ancestors keyed (a fully keyed frame, or for
missing joints any frame), and the centre from the mean of a provisional per-channel interpolation of the root (the
unknown frames' own values are never used). The move is rigid and applied to joint 0, so keys are unchanged by the
round trip. ``object_track`` (hands): the manipulated object's pose per frame, in the wrist's parent space; a
checkpoint trained with the object (``cfg.cond_dim``) sees it in the wrist frame (``data.hand_object``).
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from motioncore.core.gaps import is_whole_frames
from motioncore.core.kinematics import facing_directions, yaw_quat
from motioncore.core.rotations import quat_apply, quat_conj, quat_continuity, quat_mul, quat_normalize
from motioncore.core.skeleton import Skeleton
from motioncore.data.hand_object import normalise_cond, object_features
from motioncore.errors import MotioncoreError, ShapeError, WholeFramesError
from motioncore.families.anyorder.model_elements import (
    body_joints,
    elements_to_motion,
    group_channels,
    to_elements,
    ungroup_channels,
)
from motioncore.families.anyorder.model_sampling import sample
from motioncore.infill.family import Filled, Request
from motioncore.infill.fill import back_to_clip, model_request
from motioncore.infill.plan import InfillPlan, checked_window
from motioncore.infill.rate import interp_channels

__all__ = ["AnyOrderFamily", "fill_window", "fill_joints"]


class AnyOrderFamily:
    """The sampling in-fill: no request-time fit; each window checked as it is sampled."""

    checks_clip = False
    own_rate = False

    def fit(self, request: Request, plan: InfillPlan) -> None:
        return None

    def fill(self, request: Request, plan: InfillPlan) -> Filled:
        if plan.route != "same":
            return back_to_clip(plan, self.fill(model_request(request, plan), plan.model))
        return self._fill_same(request, plan)

    def _fill_same(self, req: Request, plan: InfillPlan) -> Filled:
        q = plan.q
        T = q.shape[0] if q.ndim == 3 else 0
        args = (req.order, req.temperature, req.n_samples, req.seed, req.k, req.check)
        if req.window is None or T <= req.window or q.ndim != 3:
            return fill_window(req.model, req.meta, req.rotations, req.root, req.known, *args, req.fill,
                               req.object_track, req.residual)
        J = q.shape[1]
        keys, todo = plan.keys, plan.todo
        if not plan.frames.any():
            raise MotioncoreError("fill: nothing to fill")
        r = plan.r
        out_q = np.repeat(q[None], req.n_samples, 0)
        out_r = np.repeat(r[None], req.n_samples, 0)
        for i, (s, e, a, b) in enumerate(plan.windows()):  # each gap in its own window (core.gaps)
            sel = np.zeros((b - a, J + 1), bool)
            sel[s - a:e - a] = todo[s:e]
            ot = None if req.object_track is None else (np.asarray(req.object_track[0])[a:b],
                                                        np.asarray(req.object_track[1])[a:b])
            w = fill_window(req.model, req.meta, q[a:b], r[a:b], keys[a:b], req.order, req.temperature,
                            req.n_samples, req.seed + 7919 * i, req.k, req.check, sel, ot, req.residual)
            out_q[:, a:b] = np.where(sel[None, :, :J, None], w.rotations, out_q[:, a:b])
            out_r[:, a:b] = np.where(sel[None, :, J:], w.root, out_r[:, a:b])
        out_q = quat_continuity(np.where(~todo[None, :, :J, None], quat_normalize(q)[None], out_q), axis=1)
        out_q = np.where(~todo[None, :, :J, None], q[None], out_q)  # untouched elements bit-identical
        return Filled(out_q, out_r, keys, todo, plan=plan)


def fill_joints(model, meta: dict, rotations: np.ndarray, root: np.ndarray, missing: np.ndarray,
                window: int = 30, overlap: int = 6, check: Callable[[], None] | None = None) -> np.ndarray:
    """(T, J, 4) ``rotations`` with the joints marked in ``missing`` (J,) filled on every frame from the
    other joints (a capture or a retarget that lacks them), by a per-element checkpoint. The clip is
    filled in windows of ``window`` frames (the training length), left to right; each window after the
    first also keeps its first ``overlap`` frames of the missing joints from the window before as keys,
    so the joints move on continuously. Other joints and the root come back bit-identical."""
    if getattr(model.cfg, "group_frames", False):
        raise MotioncoreError("missing joints need a per-element checkpoint (such as anyorder-hands); this one "
                              "fills whole frames (group_frames)")
    q = np.asarray(rotations, np.float64).copy()
    T, J = q.shape[:2]
    miss = np.asarray(missing, bool)
    if miss.shape != (J,) or not miss.any() or miss.all():
        raise ShapeError(f"missing: expected ({J},) bool with some but not all joints, got {miss.shape}")
    if window <= overlap or overlap < 0:
        raise MotioncoreError(f"window ({window}) must exceed overlap ({overlap}) >= 0")
    start = 0
    while start < T:
        a, b = max(0, start - overlap), min(T, start + window - overlap)
        if b - a < 2:
            a = max(0, b - 2)
        known = np.ones((b - a, J + 1), bool)
        known[start - a:, :J][:, miss] = False          # the overlap frames (before start) are keys
        if known.all():
            break
        if check is not None:
            check()
        f = fill_window(model, meta, q[a:b], root[a:b], known, "bisection", 0.0, 1, 0, None, None, None)
        q[start:b, miss] = f.rotations[0][start - a:][:, miss]
        start = b
    return q


def fill_window(model, meta: dict, rotations: np.ndarray, root: np.ndarray, known: np.ndarray, order: str,
                 temperature: float, n_samples: int, seed: int, k: int | None, check: Callable[[], None] | None,
                 fill: np.ndarray | None, object_track: tuple[np.ndarray, np.ndarray] | None = None,
                 residual: float = 1.0) -> Filled:
    """One window (the whole clip as given) for a sampling model: placed as a training window, sampled, moved back."""
    sk = Skeleton.from_dict(meta["skeleton"])
    J, rj = sk.num_joints, int(meta["root_joint"])
    cfg = model.cfg
    q, r, keys, todo = checked_window(rotations, root, known, fill, J)
    T = q.shape[0]
    if not todo.any():
        raise MotioncoreError("fill: nothing to fill")
    if cfg.group_frames and not is_whole_frames(keys, todo):
        raise WholeFramesError("this checkpoint fills whole frames (group_frames): key every joint and the root "
                              "on a keyed frame, or use a per-element checkpoint for partial keys")
    body = body_joints(sk)
    needed: set[int] = set()   # the rotations the placement reads: the facing joints' ancestors (a joint's
    for j in (body.root, *body.hips):   # position depends on its ancestors' rotations, not its own)
        j = int(sk.parents[j])
        while j >= 0 and j not in needed:
            needed.add(j)
            j = int(sk.parents[j])
    placed = keys[:, sorted(needed)].all(1) & keys[:, J]
    if not placed.any():
        raise MotioncoreError("known: at least one frame with the root and the joints that give the facing "
                              f"({', '.join(sk.names[j] for j in sorted(needed))}) keyed is needed to place "
                              "the character")
    q_in, q = q, quat_normalize(q)
    # provisional per-channel interpolation (channels without keys keep their input) for the centre
    have = keys.any(0)
    pq, pr = q[None].copy(), r[None].copy()
    if have.all():
        pq, pr = interp_channels(pq, pr, keys)
    elif have[J]:
        _, pr = interp_channels(pq[:, :, :1], pr, np.stack([keys[:, J], keys[:, J]], 1))
    pos = np.broadcast_to(np.asarray(sk.offsets, np.float64), (1, T, J, 3)).copy()
    pos[0, :, rj] = pr[0]
    first = int(np.argmax(placed))
    face = first + int(np.argmin(placed[first:])) - 1 if not placed[first:].all() else T - 1  # last of the run
    _, gp = sk.forward_kinematics(pq, pos)
    fwd = facing_directions(gp[:, face], body)
    yaw = yaw_quat(-np.arctan2(fwd[:, 0], fwd[:, 2]))[0]  # (4,)
    centre = (gp[0, :, body.root] * np.array([1.0, 0.0, 1.0])).mean(0)
    # move joint 0 like kinematics.reframe: rotation yaw * q0, translation yaw (p0 - centre)
    mq = q.copy()
    mq[:, 0] = quat_mul(yaw, q[:, 0])
    mpos = np.broadcast_to(np.asarray(sk.offsets, np.float64), (T, J, 3)).copy()
    mpos[:, rj] = r
    mpos[:, 0] = quat_apply(yaw, mpos[:, 0] - centre)
    grid = to_elements(mq[None], mpos[None], meta["root_norm"], rj)[0]  # (T, J + 1, 6) float32
    mask, to_fill = torch.as_tensor(keys), torch.as_tensor(todo)
    if cfg.group_frames:
        grid = group_channels(cfg, grid[None])[0]
        mask, to_fill = mask.all(1, keepdim=True), to_fill.all(1, keepdim=True)
    param = next(model.parameters())
    step = int(k) if k else cfg.grid_channels
    frame_cond = None
    if object_track is not None and getattr(cfg, "cond_dim", 0) and "cond" in meta and rj == 0:
        oq, op = (np.asarray(a, np.float64) for a in object_track)
        if oq.shape != (T, 4) or op.shape != (T, 3) or not (np.isfinite(oq).all() and np.isfinite(op).all()):
            raise ShapeError(f"object_track: expected finite ({T}, 4) rotations and ({T}, 3) positions, got "
                             f"{oq.shape} and {op.shape}")
        wq = np.where(keys[:, :1], q[:, 0], pq[0, :, 0]) if have[0] else q[:, 0]  # the wrist (joint 0, no parent)
        wp = np.where(keys[:, J:], r, pr[0]) if have[J] else r
        frame_cond = torch.as_tensor(normalise_cond(object_features(wq, wp, oq, op), meta["cond"]["norm"]))
    outs = []
    for s in range(n_samples):  # one sample per call keeps the cancellation check responsive
        if check is not None:
            check()
        outs.append(sample(model, grid.to(param.dtype), mask, positions_to_fill=to_fill, order=order,
                           temperature=temperature, n_samples=1, seed=seed + s, k=step, frame_cond=frame_cond)[0])
    out = torch.stack(outs).to(torch.float64).cpu()
    if cfg.group_frames:
        out = ungroup_channels(cfg, out)
    fq, fr = elements_to_motion(out)  # (S, T, J, 4), (S, T, 3)
    fq, fr = fq.numpy(), fr.numpy() * np.asarray(meta["root_norm"]["std"]) + np.asarray(meta["root_norm"]["mean"])
    inv = quat_conj(yaw)
    fq[:, :, 0] = quat_mul(inv, fq[:, :, 0])
    if rj == 0:  # the root translation is joint 0's: undo the move
        fr = quat_apply(inv, fr) + centre
    keep = ~todo  # keys and elements left alone come back as sent
    fq = quat_continuity(np.where(keep[None, :, :J, None], q[None], fq), axis=1)
    fq = np.where(keep[None, :, :J, None], q_in[None], fq)  # bit-identical (continuity may flip signs)
    fr = np.where(keep[None, :, J:], r[None], fr)
    return Filled(fq, fr, keys, todo)
