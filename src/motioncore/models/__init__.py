"""Layer models: the shared model machinery (the registry of kinds, checkpoints). May import io, core, errors.

The nets themselves live in their families (``motioncore.families``: pfnn, mann, style, anyorder, body, hands)."""
