"""Sweep executors: objects with ``run(jobs, on_start, on_done)`` that run cells
(profiler.cellrun) somewhere and report each one back to the sweep process."""
