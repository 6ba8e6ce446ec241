"""Reproducible experiments: each module has a frozen config and ``main(cfg) -> results dict`` that
writes its figures and ``results.json`` to ``cfg.out``. Entry points live in ``scripts/``."""
