"""Workloads other than one forward pass per step (the harness's own): greedy generation."""
