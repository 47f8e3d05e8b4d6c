"""The five per-process medians of noise.log under the current resolvable-difference formula
(profiler.analysis.floor.floor_of): noise.log printed them with an earlier formula."""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))

from profiler.analysis.floor import floor_of  # noqa: E402
from profiler.runs.samples import ProcessWindow  # noqa: E402

log = (Path(__file__).parent / "noise.log").read_text()
line = next(text for text in log.splitlines() if "p50 of each process" in text)
medians = [float(x) for x in re.findall(r"\d+\.\d+", line)]
got = floor_of([ProcessWindow(latency_ms=(m,)) for m in medians])
print("p50 of each process (noise.log):", ", ".join(f"{m:.3f}" for m in medians), "ms")
print(f"between processes: CV {100 * got['between_process_cv']:.2f} % of the p50")
print(
    f"smallest difference a compare resolves here: ±{100 * got['smallest_resolvable']:.1f} % "
    f"with {got['processes_per_side']} processes a side, "
    f"±{100 * got['smallest_resolvable_one_process']:.1f} % with one"
)
