"""The rows of the trace's tables as `summarize --json` prints them (and summary.json holds): each
table's columns by name, typed. msgspec only, so the documents' types (profiler.cli.documents)
name them without loading pandas; the schemas in docs/schema/ describe the columns from them.

A row names its table's columns; a column absent from a trace's table (a trace without GPU work
has no kernel columns) is left out of the row, and a column a row does not name is let through
(the tables are built from DataFrames whose columns the trace modules own). A figure that is not
finite is null; counts are numbers.
"""

from __future__ import annotations

import msgspec

Unset = msgspec.UnsetType
UNSET = msgspec.UNSET


class TableRow(msgspec.Struct, kw_only=True):
    """A row of one of the trace's tables: the columns it names typed, each one optional."""


class TraceDevice(TableRow):
    """A GPU as the trace describes it (profiler.trace.schema.DeviceProperties: Kineto's
    cudaDeviceProp)."""

    id: float | None | Unset = UNSET
    name: str | None | Unset = UNSET
    compute_major: float | None | Unset = UNSET
    compute_minor: float | None | Unset = UNSET
    num_sms: float | None | Unset = UNSET
    max_threads_per_block: float | None | Unset = UNSET
    max_threads_per_sm: float | None | Unset = UNSET
    regs_per_block: float | None | Unset = UNSET
    regs_per_sm: float | None | Unset = UNSET
    warp_size: float | None | Unset = UNSET
    shared_mem_per_block: float | None | Unset = UNSET
    shared_mem_per_block_optin: float | None | Unset = UNSET
    shared_mem_per_sm: float | None | Unset = UNSET
    total_global_mem: float | None | Unset = UNSET


class DeviceMetricsRow(TableRow):
    """One GPU's utilization, estimated SM efficiency and occupancy, busy time and idle gaps
    over the steps (profiler.trace.device_metrics.DeviceMetrics)."""

    device: float | None | Unset = UNSET
    name: str | None | Unset = UNSET
    gpu_utilization_pct: float | None | Unset = UNSET
    est_sm_efficiency_pct: float | None | Unset = UNSET
    est_achieved_occupancy_pct: float | None | Unset = UNSET
    theoretical_occupancy_pct: float | None | Unset = UNSET
    busy_us: float | None | Unset = UNSET
    idle_gaps: float | None | Unset = UNSET
    idle_total_us: float | None | Unset = UNSET
    idle_largest_us: float | None | Unset = UNSET
    idle_median_us: float | None | Unset = UNSET


class StepRow(TableRow):
    """One profiled step: its CPU and GPU spans, the step time breakdown's roles (µs) and its
    GPU figures (profiler.trace.steps, breakdown); a trace without GPU work has the CPU span
    alone."""

    step: str | None | Unset = UNSET
    cpu_start: float | None | Unset = UNSET
    cpu_end: float | None | Unset = UNSET
    start: float | None | Unset = UNSET
    end: float | None | Unset = UNSET
    gpu_events: float | None | Unset = UNSET
    kernel: float | None | Unset = UNSET
    memcpy: float | None | Unset = UNSET
    memset: float | None | Unset = UNSET
    communication: float | None | Unset = UNSET
    runtime: float | None | Unset = UNSET
    dataloader: float | None | Unset = UNSET
    cpu_exec: float | None | Unset = UNSET
    other: float | None | Unset = UNSET
    step_us: float | None | Unset = UNSET
    cpu_step_us: float | None | Unset = UNSET
    gpu_busy_us: float | None | Unset = UNSET
    gpu_utilization_pct: float | None | Unset = UNSET
    kernels: float | None | Unset = UNSET


class CategoryTableRow(TableRow):
    """Kernel time of one category (GEMM, convolution, elementwise ...) and its time in Tensor
    Core kernels."""

    category: str | None | Unset = UNSET
    kernels: float | None | Unset = UNSET
    calls: float | None | Unset = UNSET
    total_us: float | None | Unset = UNSET
    share_pct: float | None | Unset = UNSET
    tensor_core_us: float | None | Unset = UNSET
    tensor_core_pct: float | None | Unset = UNSET


class KernelTableRow(TableRow):
    """One kernel name: its short and full name, category, calls and times, Tensor Core use and
    the rule that says so, launch configuration, occupancy and the operator that launched it
    most (profiler.trace.kernels.KERNEL_TABLE_COLUMNS)."""

    kernel: str | None | Unset = UNSET
    name: str | None | Unset = UNSET
    category: str | None | Unset = UNSET
    calls: float | None | Unset = UNSET
    total_us: float | None | Unset = UNSET
    mean_us: float | None | Unset = UNSET
    median_us: float | None | Unset = UNSET
    min_us: float | None | Unset = UNSET
    max_us: float | None | Unset = UNSET
    share_pct: float | None | Unset = UNSET
    tensor_core: str | None | Unset = UNSET
    tensor_core_rule: str | None | Unset = UNSET
    tensor_core_why: str | None | Unset = UNSET
    registers_per_thread: float | None | Unset = UNSET
    shared_memory_bytes: float | None | Unset = UNSET
    block: str | None | Unset = UNSET
    grid: str | None | Unset = UNSET
    blocks_per_sm: float | None | Unset = UNSET
    warps_per_sm: float | None | Unset = UNSET
    kineto_est_occupancy_pct: float | None | Unset = UNSET
    theoretical_occupancy_pct: float | None | Unset = UNSET
    launch_configs: float | None | Unset = UNSET
    top_operator: str | None | Unset = UNSET


class OperatorTableRow(TableRow):
    """One CPU operator: calls, total and self CPU time, and the kernels it launched and their
    time."""

    operator: str | None | Unset = UNSET
    calls: float | None | Unset = UNSET
    cpu_total_us: float | None | Unset = UNSET
    cpu_self_us: float | None | Unset = UNSET
    kernels: float | None | Unset = UNSET
    kernel_us: float | None | Unset = UNSET


class HardwareKernelRow(TableRow):
    """One profiled kernel: the name rules' Tensor Core call beside Nsight Compute's
    measurements (profiler.report.hardware_view.HARDWARE_CSV_COLUMNS)."""

    kernel: str | None | Unset = UNSET
    name: str | None | Unset = UNSET
    category: str | None | Unset = UNSET
    calls: float | None | Unset = UNSET
    total_us: float | None | Unset = UNSET
    share_pct: float | None | Unset = UNSET
    tensor_core: str | None | Unset = UNSET
    tensor_core_rule: str | None | Unset = UNSET
    hw_tensor_core: str | None | Unset = UNSET
    rules_vs_hardware: str | None | Unset = UNSET
    hw_tensor_pipe_pct: float | None | Unset = UNSET
    hw_tensor_inst: float | None | Unset = UNSET
    hw_achieved_occupancy_pct: float | None | Unset = UNSET
    hw_theoretical_occupancy_pct: float | None | Unset = UNSET
    theoretical_occupancy_pct: float | None | Unset = UNSET
    kineto_est_occupancy_pct: float | None | Unset = UNSET
    hw_launches: float | None | Unset = UNSET
    hw_match: str | None | Unset = UNSET
    hw_kernel_name: str | None | Unset = UNSET


class PhaseRow(TableRow):
    """One generation phase (or the kernels outside every phase span): spans, wall and kernel
    time, launches, its GPU window and idle time, time in Tensor Core kernels
    (profiler.trace.phase_kernels.PHASE_COLUMNS)."""

    phase: str | None | Unset = UNSET
    spans: float | None | Unset = UNSET
    wall_us: float | None | Unset = UNSET
    kernel_us: float | None | Unset = UNSET
    kernel_share_pct: float | None | Unset = UNSET
    launches: float | None | Unset = UNSET
    gpu_window_us: float | None | Unset = UNSET
    gpu_idle_us: float | None | Unset = UNSET
    gpu_idle_pct: float | None | Unset = UNSET
    tensor_core_pct: float | None | Unset = UNSET


class PositionRow(TableRow):
    """One (phase, position inside a generation): spans and mean wall time, kernel time and
    launches (profiler.trace.phase_kernels.POSITION_COLUMNS)."""

    phase: str | None | Unset = UNSET
    position: float | None | Unset = UNSET
    spans: float | None | Unset = UNSET
    mean_wall_us: float | None | Unset = UNSET
    mean_kernel_us: float | None | Unset = UNSET
    mean_launches: float | None | Unset = UNSET


class LayerRow(TableRow):
    """One TensorRT layer: type, precision, tactic, time per call, share, and the profiled
    kernel attributed to it (profiler.trace.trt_layers.LAYER_COLUMNS)."""

    layer: str | None | Unset = UNSET
    type: str | None | Unset = UNSET
    precision: str | None | Unset = UNSET
    tactic: str | None | Unset = UNSET
    ms_per_call: float | None | Unset = UNSET
    share_pct: float | None | Unset = UNSET
    kernel: str | None | Unset = UNSET
    profiled_us_per_call: float | None | Unset = UNSET


class KernelTimeRow(TableRow):
    """A kernel by name with its calls and total time (an engine's kernels no layer took, or
    kernels outside the engine)."""

    kernel: str | None | Unset = UNSET
    calls: float | None | Unset = UNSET
    total_us: float | None | Unset = UNSET
