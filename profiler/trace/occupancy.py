"""Theoretical occupancy, computed the way CUDA's occupancy calculator does it.

Inputs per kernel launch (all in a Kineto trace): registers per thread, shared memory per block
(Kineto writes static + dynamic in one number, ``"shared memory"``) and threads per block; per
GPU the ``deviceProperties`` block (Kineto's names: ``numSms``, ``maxThreadsPerMultiprocessor``,
``regsPerMultiprocessor``, ``sharedMemPerMultiprocessor``, ``sharedMemPerBlockOptin``,
``computeMajor``/``computeMinor``; the loader maps older spellings).

The result is the upper bound an SM can hold: active blocks per SM = the smallest of four
limits (warps, blocks, registers, shared memory), occupancy = active warps / max warps per SM.

How this differs from Kineto's ``est. achieved occupancy %``: Kineto calls the same calculator
but (a) caps the active blocks by ``blocks per SM`` of the grid (so a small grid reads low)
and (b) passes ``maxDynamicSharedSizeBytes = 0`` with the default shared-memory limit, so any
kernel that uses more than 48 KB of shared memory (it must have opted in to run at all) is
rejected by the calculator and the field reads 0: most Hopper GEMMs. Here a kernel that ran
is taken to have opted in, up to ``sharedMemPerBlockOptin``.

Details that matter (CUDA's cuda_occupancy.h, the CUDA Occupancy Calculator):
- registers are allocated per warp in units of 256 (sm_50 and later), and a warp's
  registers come from one of the SM's 4 sub-partitions (register file / 4);
- shared memory is allocated per block in units of 128 bytes (sm_70+; 256 before), and since
  sm_80 the system reserves 1 KB of shared memory per block on top of what the kernel asks;
- the shared memory available per SM is taken at its maximum carve-out
  (``sharedMemPerMultiprocessor``), which is what the calculator assumes by default on sm_70+.
"""

from __future__ import annotations

from dataclasses import dataclass

from profiler.trace.load import DeviceProperties


@dataclass(frozen=True)
class ArchLimits:
    max_blocks_per_sm: int
    reg_alloc_unit: int = 256  # registers, per warp
    sub_partitions: int = 4  # register file is split 4 ways (sm_60+ except sm_60: 2)
    max_regs_per_thread: int = 255
    smem_alloc_unit: int = 128  # bytes
    reserved_smem_per_block: int = 0


#: Per compute capability (major, minor); (major, None) covers the whole family. From the CUDA
#: C++ Programming Guide's "Compute Capabilities" table and cuda_occupancy.h.
ARCH_LIMITS: dict[tuple[int, int | None], ArchLimits] = {
    (6, 0): ArchLimits(32, sub_partitions=2, smem_alloc_unit=256),
    (6, None): ArchLimits(32, smem_alloc_unit=256),
    (7, 5): ArchLimits(16),  # Turing
    (7, None): ArchLimits(32),  # Volta, Xavier
    (8, 0): ArchLimits(32, reserved_smem_per_block=1024),  # A100
    (8, 9): ArchLimits(24, reserved_smem_per_block=1024),  # Ada
    (8, None): ArchLimits(16, reserved_smem_per_block=1024),  # GA10x, Orin (8.6, 8.7)
    (9, None): ArchLimits(32, reserved_smem_per_block=1024),  # Hopper
    (10, None): ArchLimits(32, reserved_smem_per_block=1024),  # Blackwell datacenter
    (11, None): ArchLimits(32, reserved_smem_per_block=1024),
    (12, None): ArchLimits(32, reserved_smem_per_block=1024),  # Blackwell consumer
}
_DEFAULT_LIMITS = ArchLimits(32, reserved_smem_per_block=1024)


def arch_limits(device: DeviceProperties) -> ArchLimits:
    return (
        ARCH_LIMITS.get((device.compute_major, device.compute_minor))
        or ARCH_LIMITS.get((device.compute_major, None))
        or _DEFAULT_LIMITS
    )


@dataclass(frozen=True)
class Occupancy:
    active_blocks_per_sm: int
    occupancy: float  # 0..1: active warps / max warps per SM
    limiter: str  # "warps", "blocks", "registers", "shared memory", or why not
    blocks_by_warps: int
    blocks_by_blocks: int
    blocks_by_registers: int
    blocks_by_shared_memory: int


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


_BIG = 1 << 30


def _blocks_by_registers(
    registers_per_thread: int, warps_per_block: int, device: DeviceProperties, limits: ArchLimits
) -> int:
    """Blocks per SM the registers allow: per-warp allocation in units, warps packed into the
    sub-partitions."""
    warp_size = device.warp_size or 32
    regs_per_sm = device.regs_per_sm or device.regs_per_block or 65536
    regs = max(int(registers_per_thread), 0)
    if regs == 0:
        return _BIG
    if regs > limits.max_regs_per_thread:
        return 0
    regs_per_warp = _round_up(regs * warp_size, limits.reg_alloc_unit)
    regs_per_block = regs_per_warp * _round_up(warps_per_block, limits.sub_partitions)
    if regs_per_block > (device.regs_per_block or regs_per_sm):
        return 0
    warps_per_partition = (regs_per_sm // limits.sub_partitions) // regs_per_warp
    return (warps_per_partition * limits.sub_partitions) // warps_per_block


def _blocks_by_shared_memory(
    shared_memory_per_block: int, device: DeviceProperties, limits: ArchLimits
) -> int:
    """Blocks per SM the shared memory allows: the kernel's bytes plus the per-block
    reservation, in allocation units."""
    smem_per_sm = device.shared_mem_per_sm or device.shared_mem_per_block
    smem = max(int(shared_memory_per_block), 0)
    smem_allocated = _round_up(smem + limits.reserved_smem_per_block, limits.smem_alloc_unit)
    optin = device.shared_mem_per_block_optin or device.shared_mem_per_block
    if smem == 0 and limits.reserved_smem_per_block == 0:
        return _BIG
    if smem > optin or smem_allocated > smem_per_sm:
        return 0
    return smem_per_sm // smem_allocated


def theoretical_occupancy(
    registers_per_thread: int,
    shared_memory_per_block: int,
    threads_per_block: int,
    device: DeviceProperties,
) -> Occupancy | None:
    """None when the inputs cannot describe a launch (no threads, no device limits)."""
    warp_size = device.warp_size or 32
    max_threads_per_sm = device.max_threads_per_sm
    if threads_per_block <= 0 or max_threads_per_sm <= 0:
        return None
    limits = arch_limits(device)
    max_warps_per_sm = max_threads_per_sm // warp_size
    warps_per_block = -(-threads_per_block // warp_size)

    # warps and blocks
    by_warps = max_warps_per_sm // warps_per_block
    by_blocks = limits.max_blocks_per_sm

    by_registers = _blocks_by_registers(registers_per_thread, warps_per_block, device, limits)
    by_smem = _blocks_by_shared_memory(shared_memory_per_block, device, limits)

    candidates = {
        "warps": by_warps,
        "blocks": by_blocks,
        "registers": by_registers,
        "shared memory": by_smem,
    }
    # first of equal minima: warps, blocks, ...
    limiter = min(candidates, key=candidates.__getitem__)
    active = candidates[limiter]
    if threads_per_block > (device.max_threads_per_block or 1024):
        active, limiter = 0, "block too large"
    occupancy = active * warps_per_block / max_warps_per_sm if max_warps_per_sm else 0.0
    return Occupancy(
        active_blocks_per_sm=int(active),
        occupancy=min(occupancy, 1.0),
        limiter=limiter,
        blocks_by_warps=int(by_warps),
        blocks_by_blocks=int(by_blocks),
        blocks_by_registers=int(min(by_registers, _BIG)),
        blocks_by_shared_memory=int(min(by_smem, _BIG)),
    )
