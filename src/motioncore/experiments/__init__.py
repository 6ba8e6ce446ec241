"""Layer experiments: reproducible experiments run from scripts/. May import eval and every layer below (not batch, cli).

Reproducible experiments: each module has a frozen config and ``main(cfg) -> results dict`` that
writes its figures and ``results.json`` to ``cfg.out``. Entry points live in ``scripts/``."""
