"""Training recipe for the deterministic body in-fill model (``infill-body``; ``motioncore train infill-body``).

Data (``build_data``): the Bandai train split and every CMU training subject (01-03, 06, 08, 09), the CMU
clips retargeted onto the Bandai skeleton (``retarget.retarget``, twists matched to Bandai's mean local
rotations, as an imported rig is in the add-on), all at 30 fps, each with its left-right mirror image and
played at 0.8x and 1.25x speed as well. ``--data cmu`` trains on the CMU subjects alone (the permissive
``infill-body-cmu``; CMU's terms allow products). ``--data all`` adds Bandai dataset 2's standing gestures (raise
or wave one or both hands: upper-body variety), drawn at ``gesture_share`` of each batch. The arrays are cached
under the run folder.

For performers never trained on (``posture_deg``, ``root_height_cm``, ``dropout``, ``select``): each window can be
re-posed as another performer stands (every joint's local rotation turned by its own fixed small rotation over the
window, inputs and truth alike), its root raised or lowered, the transformer trained with dropout, and the weights
exported those that scored best on CMU subjects 05 and 07 (never trained on) at a validation.

Tasks (``sample_task``), one key pattern per batch, as an animator keys:
- dense context around a gap (LaFAN1): 1-10 context frames, a gap of 1-60 frames drawn with probability
  proportional to 1/length, then 1-10 keyed frames;
- sparse keys: a key pose every N frames (2-30), nothing else;
- on top of either, sometimes: some joints keyed at frames inside a gap; the root's translation keyed at every
  frame (a path) or only at the first key (poses keyed, the root not).

Loss over the frames not keyed: L1 on global rotation matrices + L1 on global positions (metres) + 0.5 x L1
on local rotation matrices, divided by the same L1 of the Bezier base on the batch (``loss="ratio"``): every
gap length and task is trained on how much it improves on the animator's curve, as the benchmark scores it.
(The probe's weighting, L1 x longest gap / 10, ``loss="length"``, improved long gaps at the cost of short
ones: after 1,186 steps Bandai L2Q/Interp was 1.04 / 0.91 / 0.87 at 5 / 15 / 30, worse than Bezier at 5.)
AdamW, warm-up, cosine decay over the run's wall-time budget, gradient clip 5, EMA 0.999 weights (what is
validated and exported). One torch thread by default.

Resumable: every ``save_every`` seconds the whole state (weights, EMA, optimiser, step, wall time, history) is
written atomically to ``RUN/state.safetensors`` + ``RUN/state.json``; each step's batch is drawn from
``default_rng([seed, step])``, so a resumed run continues exactly. Every ``val_every`` seconds the EMA model is
scored on fixed validation windows (L2Q over Interp at 5/15/30/45 on Bandai test windows and on CMU subject
05 mapped onto the Bandai skeleton; CMU subject 07 is never looked at during training) and ``RUN/curve.png``
is redrawn.

The parts: the data (``infill_body_data``), one batch's task and loss (``infill_body_batch``), the training loop,
its state and the command-line entry (``infill_body_train``), the checkpoint export (``infill_body_export``). This
module holds the recipe's settings (``BodyRecipe``).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["BodyRecipe"]


@dataclass(frozen=True)
class BodyRecipe:
    data: str = "bandai+cmu"  # bandai+cmu | cmu | all (bandai+cmu and Bandai's standing gestures)
    cmu_share: float = 0.5  # bandai+cmu, all: the share of each batch's windows drawn from the CMU clips
    gesture_share: float = 0.2  # all: the share drawn from Bandai's gestures (the rest: Bandai locomotion)
    posture_deg: float = 0.0  # augmentation: each joint's local rotation turned by a fixed random rotation per
    #                           window (normal, this many degrees; 0: off), as another performer's posture
    root_height_cm: float = 0.0  # augmentation: the root's height moved per window (uniform, +- this many cm)
    dropout: float = 0.0  # the transformer's dropout (training only)
    select: str = "last"  # the weights exported: "last" (the EMA at the end) | "unseen" (the EMA whose L2Q on the
    #                       performers never trained on, CMU 05 and 07, was lowest at a validation)
    d_model: int = 192
    n_layers: int = 4
    n_heads: int = 4
    d_ff: int = 768
    tokens: int = 2560  # frames per batch (batch size = tokens // window length)
    lr: float = 1e-3
    weight_decay: float = 1e-4
    warmup: int = 200
    minutes: float = 110.0  # the cosine schedule's wall-time budget (cumulative over resumes)
    ema: float = 0.999
    max_gap: int = 60
    loss: str = "ratio"  # ratio (L1 over the Bezier base's, per batch) | length (L1 x gap / 10)
    seed: int = 0
    threads: int = 1
    save_every: float = 180.0
    val_every: float = 300.0
    val_windows: int = 160  # per validation set
    basis: str = "spline"  # the correction's curves (``families.body.model_spline``; "sine": the older per-gap bumps)
    contacts: bool = True  # a contact output per foot and toe, trained on the capture's labels (``core.feet``)
    blocking: float = 0.5  # the share of batches keyed as an animator blocks: a pose every N frames, nothing else
    foot_weight: float = 4.0  # the feet's velocity error where the capture's are down (``families.body.loss``)

    def __post_init__(self) -> None:
        if not 0.0 < self.cmu_share < 1.0:
            raise ValueError(f"cmu_share must be in (0, 1), got {self.cmu_share}")
        if self.data == "all" and not 0.0 <= self.gesture_share < 1.0 - self.cmu_share:
            raise ValueError(f"gesture_share must be in [0, 1 - cmu_share), got {self.gesture_share}")
        if self.select not in ("last", "unseen"):
            raise ValueError(f"select must be 'last' or 'unseen', got {self.select!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
