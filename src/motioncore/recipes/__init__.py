"""Layer recipes: training recipes that build their data from retargeted captures and validate with the benchmarks (infill-body). May import eval, retarget, tasks and every layer below."""
