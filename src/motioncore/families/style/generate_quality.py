"""How far a style request's exemplar can be trusted (issue 40): too short, or too unlike any training style
for its code to mean anything. `StyleAdapter.fit_report` adds this to every fit; the server's
``style.adapt`` reply carries it as ``exemplar_quality`` and the add-on's *Walk in Example's Style* says so.

All measured on the exemplar itself:
- **length**: the seconds of rows the fit had (the clip less its first and last second); the encoder was trained on windows of ``window_min_s`` to
  ``window_max_s`` seconds, so an exemplar under ``window_min_s`` is *too short*;
- **the fit's held-out error**: the joint position error (cm, body joints) on the exemplar's last quarter,
  which the fit never trained on (it only picked the step there), for the fitted code, the encoder's code
  and the network with no style. Above the largest such error of any training clip (``exemplar_error_cm``
  in the checkpoint's metadata, `families.style.train_heldout.fit_metadata`) the network cannot follow the exemplar at all:
  *unlike any training style* (a dance, a kick); a fitted code no better than no style there means the
  code carries nothing measurable of the exemplar;
- **code distance**: the fitted code's squared Mahalanobis distance per dimension from the training codes'
  mean (about 1 for a training clip's code), with the training clips' 99th percentile, for reference.

Legend: N rows, Z style code, J joints.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from motioncore.families.style.adapt import CodePrior


def training_distances(prior: CodePrior) -> np.ndarray:
    """(N,) squared Mahalanobis distances per dimension of the training clips' own codes from their mean."""
    if prior.codes is None:
        return np.zeros(0)
    d = prior.codes - prior.mean  # (N, Z)
    return ((d @ prior.precision) * d).sum(1) / d.shape[1]


@torch.no_grad()
def held_out_cm(pfnn: torch.nn.Module, x: torch.Tensor, phase: torch.Tensor, y_raw: np.ndarray, rows: list[int],
                z: np.ndarray | None, y_inverse: Any, pos_cols: slice, body: np.ndarray) -> float:
    """Mean body-joint position error (cm) of next-frame predictions on ``rows`` with code ``z`` (None: no style)."""
    i = torch.as_tensor(rows, dtype=torch.long)
    zz = None if z is None else torch.as_tensor(np.asarray(z, np.float32)[None], device=x.device).expand(len(rows), -1)
    pred = pfnn(x[i], phase[i], zz).double().cpu().numpy()
    J = (pos_cols.stop - pos_cols.start) // 3
    raw = y_inverse(pred)[:, pos_cols].reshape(-1, J, 3)
    true = y_raw[rows][:, pos_cols].reshape(-1, J, 3)
    return float(np.linalg.norm(raw - true, axis=-1)[:, body].mean())


def assess(seconds: float, min_s: float, errors: dict[str, float], distance: float, train_p99: float,
           train_error: dict[str, float] | None) -> dict[str, Any]:
    """The reply's ``exemplar_quality``: the figures and one line per problem (``ok`` when none)."""
    warnings = []
    if seconds < min_s:
        warnings.append(f"too short: {seconds:.1f} s of motion past the first and last second (which only give the "
                        f"path's context); the style model reads {min_s:g} s or more, a clip of {min_s + 2:g} s")
    if train_error and errors["fitted"] > train_error["max"]:
        warnings.append(f"unlike any training style: the fit's held-out error is {errors['fitted']:.1f} cm, every "
                        f"training clip's at most {train_error['max']:.1f} cm (median {train_error['p50']:.1f})")
    elif errors["fitted"] >= errors["no_style"]:
        warnings.append(f"the style code means nothing here: it predicts the example's last quarter no better than "
                        f"no style ({errors['fitted']:.2f} cm against {errors['no_style']:.2f} cm)")
    return {"ok": not warnings, "warnings": warnings, "seconds": round(seconds, 2), "min_seconds": min_s,
            "held_out_cm": {k: round(v, 3) for k, v in errors.items()},
            "training_clips_held_out_cm": train_error, "code_distance": round(distance, 3),
            "code_distance_training_p99": round(train_p99, 3)}
