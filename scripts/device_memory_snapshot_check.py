"""A memory snapshot whose peak the allocator itself states, for the snapshot analysis's check
(profiler.trace.snapshot): recorded on the GPU machine by the run's own recorder
(profiler.collect.memory_history.Recorder, the settings `run --memory-history` uses) around a few
allocations of known sizes, one of them made before the history began and freed inside it.

Writes into $OUT: snapshot_check.pickle (torch.cuda.memory._snapshot(), as the run pickles it) and
snapshot_check.json (what torch's own counters said over the same window: memory_allocated at its
start and end, max_memory_allocated after reset_peak_memory_stats at its start; the sizes asked).

Usage on the GPU machine: OUT=<folder> python3 scripts/device_memory_snapshot_check.py
"""

import json
import os
import pickle
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from profiler.collect.memory_history import Recorder  # noqa: E402

OUT = os.environ.get("OUT", "device_out")
os.makedirs(OUT, exist_ok=True)
MIB = 1 << 20
DEVICE = torch.device("cuda")


def made_before_the_history() -> torch.Tensor:
    return torch.empty(3 * MIB, dtype=torch.uint8, device=DEVICE)


def weights() -> torch.Tensor:
    return torch.empty(40 * MIB, dtype=torch.uint8, device=DEVICE)


def activations() -> list[torch.Tensor]:
    return [torch.empty(8 * MIB, dtype=torch.uint8, device=DEVICE) for _ in range(4)]


def scratch() -> torch.Tensor:
    return torch.empty(24 * MIB, dtype=torch.uint8, device=DEVICE)


def step(holder: list[torch.Tensor]) -> torch.Tensor:
    kept = weights()
    acts = activations()
    holder.clear()  # the tensor made before the history: freed inside it
    tmp = scratch()  # the peak: weights + 4 activations + scratch
    del tmp, acts
    return kept


def main() -> None:
    print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name())
    holder = [made_before_the_history()]
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    start = torch.cuda.memory_allocated()
    recorder = Recorder(True, [0])
    with recorder:
        recorder.before(0)
        kept = step(holder)
        recorder.after(0)
    end = torch.cuda.memory_allocated()
    peak = torch.cuda.max_memory_allocated()
    del kept
    assert recorder.snapshot is not None
    with open(os.path.join(OUT, "snapshot_check.pickle"), "wb") as f:
        pickle.dump(recorder.snapshot, f)
    facts = {
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(),
        "allocated_at_start": start,
        "allocated_at_end": end,
        "max_allocated": peak,
        "asked_mib": {"before": 3, "weights": 40, "activations": [8, 8, 8, 8], "scratch": 24},
        "events": recorder.events(),
    }
    with open(os.path.join(OUT, "snapshot_check.json"), "w") as f:
        json.dump(facts, f, indent=1)
    print(json.dumps(facts))


if __name__ == "__main__":
    main()
