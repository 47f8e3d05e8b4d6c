"""The arithmetic behind a run's headline, over plain numbers and dicts; never imports torch.

The timed window is the measurement: each iteration synchronized, no profiler attached. A
trace's step time is measured under the profiler, which adds its own overhead;
``overhead_ratio`` is that step time over the timed p50. (profiler.commands.headline builds the
headline of a run from its result.json with these.)
"""

from __future__ import annotations

from typing import Any

MIB = 1024 * 1024
NOT_ON_CPU = "n/a (CPU)"


def mib(value: int | None) -> float | None:
    return None if value is None else value / MIB


def overhead_ratio(profiled_step_us: float | None, p50_ms: float | None) -> float | None:
    """Profiled step time / timed p50: how much slower a step runs under the profiler."""
    if not profiled_step_us or not p50_ms:
        return None
    return profiled_step_us / 1000.0 / p50_ms


def speedup(p50_a_ms: float | None, p50_b_ms: float | None) -> float | None:
    """p50 A / p50 B, as a factor (2.0: B takes half the time)."""
    return p50_a_ms / p50_b_ms if p50_a_ms and p50_b_ms else None


def flatten(data: object, prefix: str = "") -> dict[str, Any]:
    """{"a": {"b": 1}} -> {"a.b": 1}; lists stay values."""
    if not isinstance(data, dict):
        return {prefix: data}
    flat: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        flat.update(flatten(value, name) if isinstance(value, dict) else {name: value})
    return flat


def differing_fields(a: dict[str, Any], b: dict[str, Any]) -> list[tuple[str, object, object]]:
    """Every key of two nested dicts whose (flattened) value differs; a key missing on one side
    shows as None there."""
    fa, fb = flatten(a), flatten(b)
    return [
        (key, fa.get(key), fb.get(key))
        for key in sorted(set(fa) | set(fb))
        if fa.get(key) != fb.get(key)
    ]
