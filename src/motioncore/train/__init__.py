"""Layer train: the shared loop and the per-model recipes (the learnet style model: learnet, learnet_data, style). May import models, features, data, io, core, errors."""
