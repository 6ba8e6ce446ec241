"""Layer infill: one in-fill request, from its keys to the filled clip; imports core, models and below.

``fill(request)`` (``infill.fill``) is the one entry point: ``InfillPlan`` (``infill.plan``) is built once per
request (the validated masks, the gaps, the rates and their resample indices, one fit row per gap), the model's
family (``infill.family.InfillFamily``, resolved from ``models.kinds`` when the model is loaded) fits and fills it,
and ``infill.rate`` is the one home of resampling. Request-time learning: ``infill.learn``.
"""
from __future__ import annotations

from .family import Filled, InfillFamily, Request, family_for
from .fill import back_to_clip, fill, fill_clip, fill_clip_at, model_request, plan_of
from .plan import Gap, InfillPlan, at_model_rate, checked_window, known_mask
from .rate import Resample, blocked_on_model_frames, interp_channels, mirror_x

__all__ = ["fill", "fill_clip", "fill_clip_at", "plan_of", "model_request", "back_to_clip", "Request", "Filled",
           "InfillFamily", "family_for", "InfillPlan", "Gap", "at_model_rate", "checked_window", "known_mask",
           "Resample", "blocked_on_model_frames", "interp_channels", "mirror_x"]
