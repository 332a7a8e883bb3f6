"""What containing a script run costs at its start: a trivial bash script (``true``) run
through the script runtime, one at a time, under each isolation; the median and the 90th
percentile of the wall time of a whole run (work directory made and removed, namespaces,
temp space and cgroup made and gone, output read)::

    python benchmarks/script_start.py [--runs 200]

No database: the runtime is called directly. As root, the namespaces mode includes the
per-run pids cgroup and the drop to the script user.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from tickwork.config import ScriptRuntimeSettings
from tickwork.definitions.templates import Variables
from tickwork.runtimes import sandbox
from tickwork.runtimes import script as script_runtime

SPEC = {"language": "bash", "source": "true", "variables": []}


async def once(settings: ScriptRuntimeSettings) -> float:
    began = time.perf_counter()
    await script_runtime.run(SPEC, exec_timeout=30, variables=Variables({}), settings=settings)
    return time.perf_counter() - began


async def measure(modes: list[str], runs: int) -> dict[str, list[float]]:
    """The modes' runs interleaved (one of each in turn), so a busy moment costs each alike."""
    settings = {mode: ScriptRuntimeSettings(isolation=mode) for mode in modes}  # type: ignore[arg-type]
    took: dict[str, list[float]] = {mode: [] for mode in modes}
    for turn in range(runs + 5):
        for mode in modes:
            spent = await once(settings[mode])
            if turn >= 5:  # the first few warm the page cache
                took[mode].append(spent)
    return took


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    modes = ["process_group"]
    if sandbox.containment(ScriptRuntimeSettings()).namespaces:
        modes.append("namespaces")
    for mode, took in asyncio.run(measure(modes, args.runs)).items():
        took.sort()
        p90 = took[int(len(took) * 0.9)]
        print(
            f"{mode:14} median {statistics.median(took) * 1000:6.1f} ms  p90 {p90 * 1000:6.1f} ms"
        )


if __name__ == "__main__":
    main()
