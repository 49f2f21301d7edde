"""Peak resident memory of this process on Linux, for the benchmarks that measure memory.

``reset_peak_rss()`` sets the peak (``VmHWM``) back to the current resident size (``/proc/self/clear_refs``),
so ``status_kib("VmHWM") - status_kib("VmRSS")`` read before a step is what the step added at its peak.
Elsewhere both return nothing useful (None / False) and the caller reports no memory figure.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["reset_peak_rss", "status_kib"]


def status_kib(field: str) -> int | None:
    """A ``/proc/self/status`` field in KiB (``VmRSS``, ``VmHWM``), None where there is none."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def reset_peak_rss() -> bool:
    """Make the peak RSS the current RSS; False where the kernel does not allow it."""
    try:
        Path("/proc/self/clear_refs").write_text("5")  # Linux: VmHWM := VmRSS
    except OSError:
        return False
    return True
