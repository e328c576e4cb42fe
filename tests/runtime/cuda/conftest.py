"""The NVRTC tests say how many sources they compiled, at the end of the run."""

import cuda_compile as nvrtc


def pytest_terminal_summary(terminalreporter):
    if nvrtc.COMPILED:
        total = sum(nvrtc.COMPILED.values())
        parts = ", ".join(f"{n} {kind}" for kind, n in sorted(nvrtc.COMPILED.items()))
        terminalreporter.write_line(f"NVRTC compiled {total} CUDA kernel variants ({parts}) "
                                    f"for {', '.join(nvrtc.ARCHS)}")
