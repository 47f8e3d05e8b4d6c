"""Workloads: what one step of a run is, how it is timed and checked (base.Workload); the
harness (profiler.collect.harness.WORKLOADS) picks one by name (profiler.runs.config.WORKLOADS)."""
