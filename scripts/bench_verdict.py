"""Time profiler.analysis.verdict.compare on 5 processes x 200 iterations x 2000 resamples per
side (target: <= 0.2 s on the 2-core development machine). Prints the best of 5 calls."""

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from profiler.analysis.verdict import compare

TARGET_S = 0.2


def main() -> None:
    rng = np.random.default_rng(1)
    a = [rng.lognormal(np.log(5.0), 0.05, 200) for _ in range(5)]
    b = [rng.lognormal(np.log(5.2), 0.05, 200) for _ in range(5)]
    times = []
    for _ in range(5):
        start = time.perf_counter()
        result = compare(a, b, resamples=2000)
        times.append(time.perf_counter() - start)
    print(
        f"compare 5 x 200 x 2000: best {min(times):.3f} s, median {np.median(times):.3f} s "
        f"(target <= {TARGET_S} s); {result.verdict} {result.ratio:.3f} "
        f"[{result.low:.3f}, {result.high:.3f}]"
    )


if __name__ == "__main__":
    main()
