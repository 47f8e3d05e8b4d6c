"""Theoretical occupancy against hand-computed CUDA occupancy-calculator values, and against
Kineto's own estimate on every launch configuration of a real V100 trace."""

import math

import numpy as np

from profiler.trace.load import DeviceProperties, load_trace
from profiler.trace.occupancy import theoretical_occupancy

from .conftest import V100_TRACE

V100 = DeviceProperties(
    id=0,
    compute_major=7,
    compute_minor=0,
    num_sms=80,
    max_threads_per_sm=2048,
    regs_per_sm=65536,
    regs_per_block=65536,
    shared_mem_per_block=49152,
    shared_mem_per_block_optin=98304,
    shared_mem_per_sm=98304,
)
A100 = DeviceProperties(
    id=0,
    compute_major=8,
    compute_minor=0,
    num_sms=108,
    max_threads_per_sm=2048,
    regs_per_sm=65536,
    regs_per_block=65536,
    shared_mem_per_block=49152,
    shared_mem_per_block_optin=166912,
    shared_mem_per_sm=167936,
)
H100 = DeviceProperties(
    id=0,
    compute_major=9,
    compute_minor=0,
    num_sms=132,
    max_threads_per_sm=2048,
    regs_per_sm=65536,
    regs_per_block=65536,
    shared_mem_per_block=49152,
    shared_mem_per_block_optin=232448,
    shared_mem_per_sm=233472,
)
T4 = DeviceProperties(
    id=0,
    compute_major=7,
    compute_minor=5,
    num_sms=40,
    max_threads_per_sm=1024,
    regs_per_sm=65536,
    regs_per_block=65536,
    shared_mem_per_block=49152,
    shared_mem_per_block_optin=65536,
    shared_mem_per_sm=65536,
)


def test_register_limited():
    # 64 regs x 32 threads = 2048 regs/warp; 16384 regs per sub-partition -> 8 warps x 4 = 32
    # warps -> 4 blocks of 8 warps -> 32/64 warps
    occ = theoretical_occupancy(64, 0, 256, V100)
    assert occ.active_blocks_per_sm == 4 and occ.limiter == "registers"
    assert math.isclose(occ.occupancy, 0.5)


def test_register_allocation_granularity():
    # 33 regs -> 1056 regs/warp, rounded up to 1280: 12 warps per sub-partition, 48 per SM,
    # 12 blocks of 4 warps = 75 % (93.75 % if registers were not allocated in units of 256)
    occ = theoretical_occupancy(33, 0, 128, V100)
    assert occ.active_blocks_per_sm == 12
    assert math.isclose(occ.occupancy, 0.75)


def test_reserved_shared_memory_per_block_on_sm80():
    # 32 KB + 1 KB reserved per block: 167936 // 33792 = 4 blocks (5 without the reservation)
    occ = theoretical_occupancy(32, 32 * 1024, 256, A100)
    assert occ.active_blocks_per_sm == 4 and occ.limiter == "shared memory"
    assert math.isclose(occ.occupancy, 0.5)


def test_large_dynamic_shared_memory_on_hopper_is_not_zero():
    # a Hopper GEMM with 200 KB of shared memory (Kineto's estimate reads 0 for such kernels):
    # (204800 + 1024) rounded to 128 -> one block per SM; 4 warps of 64
    occ = theoretical_occupancy(168, 200 * 1024, 128, H100)
    assert occ.active_blocks_per_sm == 1 and occ.limiter == "shared memory"
    assert math.isclose(occ.occupancy, 4 / 64)
    # and beyond the opt-in limit nothing fits
    assert theoretical_occupancy(32, 240 * 1024, 128, H100).occupancy == 0


def test_block_limit_on_turing():
    occ = theoretical_occupancy(16, 0, 32, T4)  # 16 blocks per SM at most on sm_75
    assert occ.active_blocks_per_sm == 16 and occ.limiter == "blocks"
    assert math.isclose(occ.occupancy, 0.5)


def test_warp_limited():
    occ = theoretical_occupancy(16, 0, 1024, V100)
    assert occ.active_blocks_per_sm == 2 and occ.limiter == "warps"
    assert occ.occupancy == 1.0


def test_reproduces_kinetos_estimate_on_every_v100_launch_config():
    """Kineto's 'est. achieved occupancy %' is the same calculator capped by the grid's blocks per
    SM (computed in float32, then lround(x * 100)); all configurations of the V100 trace agree."""
    trace = load_trace(V100_TRACE)
    launch = trace.kernel_launch
    threads = launch.block_x * launch.block_y * launch.block_z
    configs = launch.assign(threads=threads).drop_duplicates(
        ["registers_per_thread", "shared_memory", "threads", "blocks_per_sm"]
    )
    assert len(configs) > 100
    device = trace.devices[0]
    for row in configs.itertuples():
        occ = theoretical_occupancy(
            row.registers_per_thread, row.shared_memory, row.threads, device
        )
        blocks = np.float32(row.grid_x * row.grid_y * row.grid_z) / np.float32(device.num_sms)
        capped = np.float32(
            min(np.float32(occ.active_blocks_per_sm), blocks)
            * np.float32(row.threads)
            / np.float32(device.max_threads_per_sm)
        )
        assert np.floor(float(capped) * 100.0 + 0.5) == row.kineto_occupancy_pct, row
