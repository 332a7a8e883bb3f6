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


async def measure(isolation: str, runs: int) -> list[float]:
    settings = ScriptRuntimeSettings(isolation=isolation)  # type: ignore[arg-type]
    spec = {"language": "bash", "source": "true", "variables": []}
    took = []
    for _ in range(runs + 5):
        began = time.perf_counter()
        await script_runtime.run(spec, exec_timeout=30, variables=Variables({}), settings=settings)
        took.append(time.perf_counter() - began)
    return took[5:]  # the first few warm the page cache


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    modes = ["process_group"]
    if sandbox.containment(ScriptRuntimeSettings()).namespaces:
        modes.append("namespaces")
    for mode in modes:
        took = sorted(asyncio.run(measure(mode, args.runs)))
        p90 = took[int(len(took) * 0.9)]
        print(f"{mode:14} median {statistics.median(took) * 1000:6.1f} ms  p90 {p90 * 1000:6.1f} ms")


if __name__ == "__main__":
    main()
