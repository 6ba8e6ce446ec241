"""Layer eval: benchmarks (in-betweening, hands, controllers, retargeting). May import retarget, tasks and every layer below.

Evaluation: LaFAN1 in-betweening metrics (L2Q, L2P, NPSS), naive baselines and the benchmark runner."""
from __future__ import annotations

from .baselines import BASELINES, Fill, interp, zerovel
from .infill import evaluate_infill, format_table, plot_results, results_to_markdown, write_json
from .metrics import l2p, l2p_frames, l2q, l2q_frames, npss, npss_terms, position_stats

__all__ = [
    "BASELINES", "Fill", "interp", "zerovel",
    "evaluate_infill", "format_table", "plot_results", "results_to_markdown", "write_json",
    "l2p", "l2p_frames", "l2q", "l2q_frames", "npss", "npss_terms", "position_stats",
]
