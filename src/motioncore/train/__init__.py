"""Training: the shared loop and the per-model recipes."""
