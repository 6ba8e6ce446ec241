"""The clip's own motion as a donor, alone (no network, no gate), on a BVH clip's own skeleton: per gap of
``eval clips``' cut (12 gaps), cm and degrees against the deleted truth beside Blender's Bezier of the keys, and jerk
over the gap and 3 keyed frames either side over the truth's (``families.body.fill_donor``).

    python scripts/donor_gaps.py CLIP.bvh LENGTH [K]
"""
import sys

import numpy as np

from motioncore.core.gaps import runs
from motioncore.core.rotations import quat_angle, quat_continuity
from motioncore.eval.clips import cut_gaps
from motioncore.eval.infill import jerk_sum
from motioncore.eval.keyed import bezier_keys
from motioncore.families.body import fill_donor as donor
from motioncore.families.body.fill import BodyLayout
from motioncore.io.bvh import read_bvh

m = read_bvh(sys.argv[1])
sk = m.skeleton
lay = BodyLayout.of(sk)
q = quat_continuity(np.asarray(m.rotations, np.float64), axis=0)
p = np.asarray(m.positions, np.float64)
L = int(sys.argv[2]) if len(sys.argv) > 2 else 30
k = int(sys.argv[3]) if len(sys.argv) > 3 else 3
known = cut_gaps(len(q), 12, L)
bq, bp = bezier_keys(sk, q[None], p[None], known[None])
bq, bp = bq[0], bp[0]
clip = donor.describe(lay, bq, bp, known)
dq, dp = bq.copy(), bp.copy()
for s, e in runs(~known):
    got = donor.donor_fill(lay, clip, bq, bp, s, e, k=k)
    dq[s:e], dp[s:e] = got[0], got[1]
tg = sk.forward_kinematics(q, p)[1]
def sc(oq, op, s, e):
    g = sk.forward_kinematics(oq, op)[1]
    cm = np.linalg.norm(g[s:e] - tg[s:e], axis=-1).mean()
    deg = np.degrees(quat_angle(oq[s:e], q[s:e])).mean()
    j = jerk_sum(g[s - 3:e + 3])
    return cm, deg, j
tot = np.zeros((3, 3))
for s, e in runs(~known):
    t, b, d = sc(q, p, s, e), sc(bq, bp, s, e), sc(dq, dp, s, e)
    tot += [t, b, d]
    print(f"{s:5d} bez cm {b[0]:6.2f} deg {b[1]:5.2f} | donor cm {d[0]:6.2f} deg {d[1]:5.2f} | jerk/truth bez {b[2]/t[2]:.2f} donor {d[2]/t[2]:.2f}")
print(f"total donor/bez cm {tot[2, 0] / tot[1, 0]:.3f} deg {tot[2, 1] / tot[1, 1]:.3f} ; jerk/truth bez "
      f"{tot[1, 2] / tot[0, 2]:.2f} donor {tot[2, 2] / tot[0, 2]:.2f}")
