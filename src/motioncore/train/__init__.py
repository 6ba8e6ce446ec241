"""Layer train: the shared loop and the per-model recipes. May import models, features, data, io, core, errors."""
