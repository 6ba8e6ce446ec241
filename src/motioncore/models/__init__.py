"""Layer models: nets (PFNN, MANN, learnet, any-order), registry, checkpoints, sampling. May import io, core, errors.

Motion models: PFNN (phase-blended), MANN (gated experts) and the one-shot style learnet."""
from __future__ import annotations

from .learnet import FactorizedAdapter, FactorizedLinear, StyleEncoder, StyleEncoderConfig
from .mann import MANN, MANNConfig
from .pfnn import PFNN, PFNNConfig, PFNNRuntime, catmull_rom_dense, catmull_rom_weights, runtime_error

__all__ = ["FactorizedAdapter", "FactorizedLinear", "MANN", "MANNConfig", "PFNN", "PFNNConfig", "PFNNRuntime",
           "StyleEncoder", "StyleEncoderConfig", "catmull_rom_dense", "catmull_rom_weights", "runtime_error"]
