"""What a kernel launch may ask of the GPUs flopcount targets, as data with its source.

A launch outside these limits fails at launch time ("invalid configuration argument", "too many
resources requested for launch"), so the launchers' configurations are checked against them by
tests that need no GPU (``tests/runtime/cuda/test_launches.py``), together with the registers
and static shared memory NVRTC reports for each compiled kernel.

Sources: CUDA C++ Programming Guide, "Compute Capabilities", table "Technical Specifications per
Compute Capability" (columns 7.0, 8.0 and 9.0): threads, block and grid dimensions, registers,
shared memory per block (48 KB without opting in; 96 KB on 7.0, 163 KB on 8.0 and 227 KB on
9.0 with ``cudaFuncAttributeMaxDynamicSharedMemorySize``); NVIDIA Volta, A100 and Hopper Tuning
Guides ("Shared Memory"), which give the same shared-memory figures; multiprocessor counts from
the V100 (SXM2, 80 SMs), A100 (SXM4, 108 SMs) and H100 (SXM5, 132 SMs) product specifications.
"""

from __future__ import annotations

from dataclasses import dataclass

KB = 1024


@dataclass(frozen=True)
class LaunchLimits:
    """Per-launch limits of one GPU (compute capability ``major.minor``)."""

    name: str
    compute_capability: tuple
    multiprocessors: int
    shared_memory_per_block_optin: int           # with cudaFuncAttributeMaxDynamicSharedMemorySize
    max_threads_per_block: int = 1024
    max_block_dims: tuple = (1024, 1024, 64)
    max_grid_dims: tuple = (2**31 - 1, 65535, 65535)
    warp_size: int = 32
    registers_per_block: int = 64 * KB           # 32-bit registers
    max_registers_per_thread: int = 255
    shared_memory_per_block: int = 48 * KB       # static + dynamic, without opting in
    max_threads_per_multiprocessor: int = 2048

    @property
    def arch(self) -> str:
        """NVRTC's name of the architecture, e.g. ``sm_80``."""
        return f"sm_{self.compute_capability[0]}{self.compute_capability[1]}"

    def problems(self, grid: tuple, block: tuple, dynamic_shared: int = 0, static_shared: int = 0,
                 registers: int | None = None) -> list:
        """Why a launch of ``grid`` x ``block`` would be refused here (empty when it fits).
        ``registers`` is the kernel's count per thread, where it is known.

        >>> H100.problems((1,), (32, 64))
        ['block (32, 64): 2048 threads, more than 1024']
        >>> A100.problems((70000, 70000), (256,))
        ['grid (70000, 70000): dimension 1 is 70000, outside 1..65535']
        """
        out = []
        if not 1 <= len(block) <= 3 or not 1 <= len(grid) <= 3:
            return [f"grid {grid} / block {block}: one to three dimensions each"]
        threads = 1
        for d in block:
            threads *= d
        if threads > self.max_threads_per_block:
            out.append(f"block {block}: {threads} threads, more than {self.max_threads_per_block}")
        for what, dims, limit in (("block", block, self.max_block_dims), ("grid", grid, self.max_grid_dims)):
            for axis, (n, most) in enumerate(zip(dims, limit)):
                if not 1 <= n <= most:
                    out.append(f"{what} {dims}: dimension {axis} is {n}, outside 1..{most}")
        shared = dynamic_shared + static_shared
        if shared > self.shared_memory_per_block:
            out.append(f"{shared} bytes of shared memory, more than {self.shared_memory_per_block} "
                       f"without opting in")
        if registers is not None and registers * threads > self.registers_per_block:
            out.append(f"{registers} registers x {threads} threads, more than {self.registers_per_block}")
        return out


V100 = LaunchLimits("NVIDIA V100", (7, 0), multiprocessors=80, shared_memory_per_block_optin=96 * KB)
A100 = LaunchLimits("NVIDIA A100", (8, 0), multiprocessors=108, shared_memory_per_block_optin=163 * KB)
H100 = LaunchLimits("NVIDIA H100", (9, 0), multiprocessors=132, shared_memory_per_block_optin=227 * KB)

# the oldest GPU the kernels are compiled for (float atomics on halves' accumulators, warp
# shuffles with masks), and the two the performance goals name
TARGETS = (V100, A100, H100)


def for_arch(arch: str) -> LaunchLimits:
    """The target of an NVRTC architecture name (``sm_80`` or ``compute_80``).

    >>> for_arch("compute_90").name
    'NVIDIA H100'
    """
    for target in TARGETS:
        if arch.split("_")[-1] == target.arch.split("_")[-1]:
            return target
    raise KeyError(f"no launch limits written down for {arch}")
