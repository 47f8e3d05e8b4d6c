"""What the GPU and the host were doing around one timed window: the record written by
``profiler.collect.gpu_state`` (NVML) and read by ``profiler.analysis.difference``. No NVML here:
records only, so result.json can carry them and torch-free code can read them."""

from __future__ import annotations

import msgspec


class GpuSample(msgspec.Struct, frozen=True):
    """One NVML reading; a field the GPU does not report is None."""

    sm_clock_mhz: int | None = None
    temperature_c: int | None = None
    power_w: float | None = None
    throttle_mask: int | None = None
    throttle_reasons: list[str] = []  # throttle_mask decoded (NVML's clock event reasons)


class GpuState(msgspec.Struct, frozen=True):
    """The GPU before and after a timed window, and the host's load after it. When nothing
    could be read, ``not_recorded`` says why ("no NVML", "no GPU", "NVML error: ...")."""

    not_recorded: str | None = None
    device: str | None = None  # the GPU's name
    max_sm_clock_mhz: int | None = None
    before: GpuSample | None = None
    after: GpuSample | None = None
    #: time NVML counted the GPU held back by its power or thermal limit during the window
    power_limited_ms: float | None = None
    thermal_limited_ms: float | None = None
    load_average: tuple[float, float, float] | None = None  # 1, 5, 15 min, after the window
    cpus: int | None = None

    @property
    def sm_clock_mhz(self) -> float | None:
        """The SM clock over the window: the mean of the readings before and after that NVML
        did not flag idle (an idle H100 reads 345 MHz, busy 1980); all of them when both are."""
        readings = [
            (s.sm_clock_mhz, s.throttle_reasons)
            for s in (self.before, self.after)
            if s is not None and s.sm_clock_mhz is not None
        ]
        busy = [mhz for mhz, reasons in readings if "gpu_idle" not in reasons] or [
            mhz for mhz, _ in readings
        ]
        return sum(busy) / len(busy) if busy else None

    @property
    def throttle_reasons(self) -> list[str]:
        """Reasons seen in either reading (before first), idle left out: an idle GPU before the
        window is not a slowdown."""
        seen: list[str] = []
        for sample in (self.before, self.after):
            for reason in sample.throttle_reasons if sample else []:
                if reason != "gpu_idle" and reason not in seen:
                    seen.append(reason)
        return seen
