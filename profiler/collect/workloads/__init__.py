"""Workloads: what one step of a run is, how it is timed and checked (protocol.Workload); the
harness (profiler.collect.harness.WORKLOADS) picks one by name; the facts of each name are
profiler.runs.workloads.WORKLOADS."""
