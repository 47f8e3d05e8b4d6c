"""Sequential rounds by simulation: which stopping rule a comparison's rounds take.

Per-process GPU-time medians of two configs are drawn from the noise measured on GPUs
(../shared/measurement: between-process CV 0.5-2 %; the correlation of two configs' medians in
one round 0.17 on an H200, 0.55 on an H100), each side with its own run's window (process 0,
pairing with nothing) and then one window a round, both configs of a round from one process.
Each rule looks at the verdict (profiler.analysis.verdict.compare, the tool's own) after rounds
2..K and stops at the first look whose verdict at that look's level is faster, slower or the
same; the last look takes its rule's last level. Printed per rule and noise: the false
faster/slower rate of identical configs, their "same" rate, the power for real 2, 3 and 5 %
differences (decided in the right direction), the false "same" rate for a real 5 %, and the
rounds a decided comparison took (median/mean: identical configs, a real 5 %, a 1.7x
speedup). Fixed rounds (K, verdict at 0.05) is the reference.

    python scripts/sim_sequential.py --reps 2000 --rounds 5
    python scripts/sim_sequential.py --real docs/gpu/h100/verdicts/pairs_raw.json.gz

--real RAW: the same rules on real processes (scripts/bench_verdicts.py collect: every process
times every cell, as a round does): each identical pair of cells and each real difference,
over overlapping groups of 5 processes taken as 5 rounds (and the disjoint groups among them),
both figures; the verdicts each rule reaches and the processes it took.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from profiler.analysis.sequential import FIRST_LOOK, INTERIM_ALPHA  # noqa: E402
from profiler.analysis.verdict import GPU_TIME, UNDECIDED, compare  # noqa: E402

POCOCK = {2: 0.0294, 3: 0.0221, 4: 0.0182, 5: 0.0158, 6: 0.0137}  # nominal two-sided levels
OBF_C = {2: 1.977, 3: 2.004, 4: 2.024, 5: 2.040, 6: 2.053}  # O'Brien-Fleming constants


def _phi_sf(z: float) -> float:
    return 0.5 * math.erfc(z / math.sqrt(2))


def levels(rule: str, looks: int) -> list[float]:
    """The level of each look (the last one last)."""
    if rule == "fixed":
        return [0.0] * (looks - 1) + [0.05]
    if rule == "pocock":
        return [POCOCK[looks]] * looks
    if rule == "obrien-fleming":
        c = OBF_C[looks]
        return [2 * _phi_sf(c * math.sqrt(looks / j)) for j in range(1, looks + 1)]
    if rule.startswith("haybittle-peto"):  # "haybittle-peto" (the tool's level) or "...-0.01"
        interim = float(rule.rpartition("-")[2]) if rule[-1].isdigit() else INTERIM_ALPHA
        return [interim] * (looks - 1) + [0.05]
    raise ValueError(rule)


def one(rng, cv: float, rho: float, delta: float, rounds: int, alphas: list[float]):
    """(word, rounds taken) of one simulated comparison."""
    cov = cv**2 * np.array([[1, rho], [rho, 1]])
    pairs = rng.multivariate_normal([0.0, math.log1p(delta)], cov, size=rounds)
    own = rng.normal([0.0, math.log1p(delta)], cv)
    a = np.exp(np.concatenate([[own[0]], pairs[:, 0]])) * 4.2
    b = np.exp(np.concatenate([[own[1]], pairs[:, 1]])) * 4.2
    tags = [None, *[f"r{i}" for i in range(rounds)]]
    looks = range(FIRST_LOOK, rounds + 1)
    for alpha, r in zip(alphas, looks, strict=True):
        if alpha <= 0:
            continue
        v = compare(
            a[: r + 1],
            b[: r + 1],
            figure=GPU_TIME,
            rounds_a=tags[: r + 1],
            rounds_b=tags[: r + 1],
            alpha=alpha,
        )
        if v.verdict != UNDECIDED or r == rounds:
            return v.verdict, r
    return UNDECIDED, rounds


def real(path: Path, rounds: int, subsets: int) -> None:
    """The rules on real processes (the module doc's --real)."""
    import gzip
    import json
    import random

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_verdicts import IDENTICAL, LAUNCH, REAL, samples_of

    with gzip.open(path) as f:
        raw = json.loads(f.read())
    n = len(raw["processes"])
    rng = random.Random(0)
    disjoint = [list(range(g * rounds, (g + 1) * rounds)) for g in range(n // rounds)]
    groups = disjoint + [rng.sample(range(n), rounds) for _ in range(subsets)]
    looks = rounds - FIRST_LOOK + 1
    print(
        f"{path.name}: {n} processes; {len(groups)} groups of {rounds} ({len(disjoint)} disjoint), "
        f"each process a round in the group's order; looks after rounds {FIRST_LOOK}..{rounds}"
    )
    cases = [("identical", IDENTICAL), ("224 vs 220 px", [REAL]), ("launch-bound pair", [LAUNCH])]
    if "fp32_bs15_224" in raw["cells"]:  # the real-differences set: each against 224 px bs 16
        base = "fp32_bs16_224"
        cases = [(key, [(base, key)]) for key in raw["cells"] if key != base]
    for title, pairs in cases:
        for figure in ("gpu_time", "latency"):
            for rule in ("fixed", "haybittle-peto"):
                alphas = levels(rule, looks)
                words: dict[str, int] = {}
                disjoint_words: dict[str, int] = {}
                taken = []
                for a, b in pairs:
                    for k, group in enumerate(groups):
                        sa, sb = samples_of(raw, a, group), samples_of(raw, b, group)
                        ma, mb = sa.medians(figure), sb.medians(figure)
                        tags = [f"r{i}" for i in range(len(ma))]
                        word, r = UNDECIDED, rounds
                        for alpha, r in zip(alphas, range(FIRST_LOOK, rounds + 1), strict=True):
                            if alpha <= 0:
                                continue
                            v = compare(
                                ma[:r],
                                mb[:r],
                                figure=figure,
                                rounds_a=tags[:r],
                                rounds_b=tags[:r],
                                alpha=alpha,
                            )
                            word = v.verdict
                            if word != UNDECIDED:
                                break
                        words[word] = words.get(word, 0) + 1
                        if k < len(disjoint):
                            disjoint_words[word] = disjoint_words.get(word, 0) + 1
                        if word != UNDECIDED:
                            taken.append(r)
                print(
                    f"{title:18} {figure:8} {rule:15} {sum(words.values())} comparisons: "
                    f"{dict(sorted(words.items()))}; "
                    f"disjoint {dict(sorted(disjoint_words.items()))}"
                    f"; rounds per decided median "
                    f"{statistics.median(taken) if taken else float('nan'):.1f}, mean "
                    f"{statistics.fmean(taken) if taken else float('nan'):.2f}"
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--rules",
        default="fixed,haybittle-peto,pocock,obrien-fleming",
        help="Comma-separated; haybittle-peto-A takes interim level A.",
    )
    parser.add_argument(
        "--cvs",
        default="0.5,1,2",
        help="Between-process CVs in %% (GPU time 0.5-2; host latency 10-30).",
    )
    parser.add_argument("--real", type=Path, default=None, help="A bench_verdicts raw file.")
    parser.add_argument("--subsets", type=int, default=240)
    args = parser.parse_args()
    if args.real is not None:
        real(args.real, args.rounds, args.subsets)
        return
    looks = args.rounds - FIRST_LOOK + 1
    rules = args.rules.split(",")
    print(
        f"{args.reps} comparisons per cell; rounds {FIRST_LOOK}..{args.rounds} looked at "
        f"({looks} looks); GPU time, tolerance 2 %"
    )
    print(
        "rule                CV    rho  | A/A false  A/A same | power 2%  3%    5%   | "
        "5% called same | rounds per decided, median/mean: A/A  5 %  1.7x"
    )
    for cv in (float(c) / 100 for c in args.cvs.split(",")):
        for rho in (0.17, 0.55):
            for rule in rules:
                alphas = levels(rule, looks)
                rng = np.random.default_rng(args.seed)
                res, taken = {}, {}
                for delta in (0.0, -0.02, -0.03, -0.05, -0.4):
                    out = [one(rng, cv, rho, delta, args.rounds, alphas) for _ in range(args.reps)]
                    res[delta] = [w for w, _ in out]
                    taken[delta] = [r for w, r in out if w != UNDECIDED]
                n = args.reps
                false = sum(w in ("faster", "slower") for w in res[0.0]) / n
                same = sum(w == "same" for w in res[0.0]) / n
                power = [sum(w == "faster" for w in res[d]) / n for d in (-0.02, -0.03, -0.05)]
                wrong_same = sum(w == "same" for w in res[-0.05]) / n
                print(
                    f"{rule:19s} {100 * cv:3.1f}% {rho:4.2f} | {100 * false:5.1f} %  "
                    f"{100 * same:6.1f} %  | {100 * power[0]:5.1f} {100 * power[1]:5.1f} "
                    f"{100 * power[2]:5.1f} | {100 * wrong_same:5.1f} %        | "
                    + "  ".join(
                        f"{statistics.median(taken[d]) if taken[d] else float('nan'):3.1f}/"
                        f"{statistics.fmean(taken[d]) if taken[d] else float('nan'):4.2f}"
                        for d in (0.0, -0.05, -0.4)
                    )
                )


if __name__ == "__main__":
    main()
