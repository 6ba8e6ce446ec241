"""Layer train: the training loop every family shares (``loop``) and the path controllers' shared recipe (``controllers``: PFNN and MANN). May import models, features, data, io, core, errors.

Each family's own training lives in its package (``families/<family>/train*.py``) on this loop."""
