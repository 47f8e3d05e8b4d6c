"""A cluster of 8 hosts x 8 GPUs, simulated on the CPU (docs/ray.md, "A cluster of N hosts x
8 GPUs"): the sampling rounds' plan on 64 fake GPUs named "node<h>:<g>" (profiler.sweep.rounds
with a fake round runner), the driver's work per cell (the rounds' records, the sweep's
manifest writes, the Ray driver loop on a fake Ray of 64 GPUs). Tests of the scheduler and of
counts, never of timings."""

import io
import json
import tarfile
import threading
from collections import Counter, deque
from pathlib import Path
from types import SimpleNamespace

import pytest

from profiler.analysis.gpu_offsets import gpu_offsets
from profiler.runs.samples import ConfigSamples
from profiler.sweep import rounds
from profiler.sweep.cell import CellJob, outcome
from tests.test_rounds_gpus import FakeGpus

HOSTS, PER_HOST = 8, 8
BACKENDS = ("pytorch_fp32", "pytorch_fp16", "inductor_fp16", "ttrt_fp32", "ttrt_fp16")
SIZES = (1, 8, 16, 32, 64, 128, 256, 512)
#: sweep.json's bytes a cell may not pass this (the 12-cell H100 fixture below has about 1 KB
#: a cell); docs/ray.md states the same limit
MANIFEST_BYTES_PER_CELL = 2048


def matrix():
    """5 backends x 8 batch sizes: the cells and their comparison groups (a batch size)."""
    cells = {f"{b}_bs{n}": {} for b in BACKENDS for n in SIZES}
    groups = {f"{b}_bs{n}": f"bs{n}" for b in BACKENDS for n in SIZES}
    return cells, groups


def cluster_gpus(hosts=HOSTS, per_host=PER_HOST) -> list[str]:
    return [f"node{h}:{g}" for h in range(hosts) for g in range(per_host)]


class FakeCluster(FakeGpus):
    """A round runner on fake GPUs "node<h>:<g>". Records each process (its GPU, its cells),
    refuses two processes at once on one GPU, and answers per cell a latency and GPU time
    scaled by its node's offset. ``waves``: the sizes of the waves that must run at once: each
    process of a wave waits until all of that wave's processes are running (a plan that needs
    more waves than that, or runs them one after another, breaks the barrier)."""

    def __init__(self, waves=(), node_offset=None):
        super().__init__()
        self.waves = list(waves)
        self.barriers = [threading.Barrier(n, timeout=30) for n in self.waves]
        self.node_offset = node_offset or {}

    def hold(self, index: int) -> None:
        bounds = [sum(self.waves[: i + 1]) for i in range(len(self.waves))]
        wave = next((i for i, end in enumerate(bounds) if index < end), None)
        if wave is not None:
            self.barriers[wave].wait()

    def answer(self, keys: list[str], gpu: str) -> dict:
        scale = 1 + self.node_offset.get(gpu.split(":")[0], 0.0)
        return {
            key: {
                "latencies_ms": [scale * truth(key)] * 3,
                "gpu_ms": [scale * truth(key)] * 3,
                "device": "fake H100",
            }
            for key in keys
        }


def truth(key: str) -> float:
    """A cell's true time on a GPU without offset (ms)."""
    backend, size = key.rsplit("_bs", 1)
    return (1 + BACKENDS.index(backend)) * int(size) / 8


def sample(processes: int, runner: FakeCluster, on_round=None):
    cells, groups = matrix()
    return rounds.sample(
        cells,
        {},
        processes,
        say=lambda line: None,
        round_runner=runner,
        gpus=cluster_gpus(),
        groups=groups,
        on_round=on_round,
    )


# ---- (a) the plan: which processes run where ------------------------------------------------


@pytest.mark.parametrize(
    "count, chunks, waves, every_gpu",
    [
        # 5 rounds: each split into its 8 batch-size groups, 40 processes in one wave; 24 GPUs
        # idle (a comparison group is the smallest piece of a round: its windows pair)
        (5, [8] * 5, [40], False),
        (8, [8] * 8, [64], True),  # 8 rounds x 8 groups fill the 64 GPUs at once
        (20, [3] * 20, [60], False),  # 20 rounds split 3 ways: 60 processes, one wave
        (70, [1] * 64 + [8] * 6, [64, 48], True),  # 64 whole rounds, then 6 rounds x 8 groups
    ],
)
def test_the_rounds_of_a_sweep_on_64_gpus(count, chunks, waves, every_gpu):
    cells, groups = matrix()
    assert rounds.round_chunks(count, HOSTS * PER_HOST, len(set(groups.values()))) == chunks
    runner = FakeCluster(waves)
    sampled = sample(count, runner)
    assert not sampled.errors
    assert sampled.rounds == count and sampled.processes == len(runner.processes) == sum(chunks)
    # never two processes on one GPU at once (FakeCluster refuses), at most one per GPU in all
    assert runner.most_at_once == max(waves) <= HOSTS * PER_HOST
    used = {gpu for gpu, _ in runner.processes}
    assert (used == set(cluster_gpus())) is every_gpu
    if len(waves) == 1:  # one wave: no GPU runs two processes, whole nodes filled first
        assert len(used) == sum(chunks)
        assert used == set(cluster_gpus()[: len(used)])
    # each cell is timed once per round, on the GPU the process ran on
    for key in cells:
        assert len(sampled.windows[key]) == count
    for key in cells:
        assert Counter(w.gpu for w in sampled.windows[key]) == Counter(
            gpu for gpu, keys in runner.processes if key in keys
        )
    # each comparison group of each round in one process (one round id, one GPU): its pairs
    for number in range(1, count + 1):
        for group in set(groups.values()):
            members = [k for k in cells if groups[k] == group]
            taken = {
                (w.round, w.gpu)
                for k in members
                for w in sampled.windows[k]
                if w.round.split("-")[1].split(".")[0] == str(number)
            }
            assert len(taken) == 1, (number, group, taken)
    # a process is whole groups, never a part of one
    for _, keys in runner.processes:
        for group in {groups[k] for k in keys}:
            assert {k for k in cells if groups[k] == group} <= set(keys)


def test_a_node_offset_cancels_in_the_pairs_and_shows_in_the_gpu_offsets():
    """Node 3 runs 4 % slow: every ratio inside a process is the true one whatever the GPU,
    and the per-GPU offsets (profiler.analysis.gpu_offsets) show node 3's GPUs 4 % off."""
    cells, _ = matrix()
    sampled = sample(8, FakeCluster([64], node_offset={"node3": 0.04}))
    for key in cells:
        base = f"pytorch_fp32_bs{key.rsplit('_bs', 1)[1]}"
        ours = {w.round: w.median("gpu_time") for w in sampled.windows[key]}
        theirs = {w.round: w.median("gpu_time") for w in sampled.windows[base]}
        assert ours.keys() == theirs.keys()  # every window pairs
        for round_id, value in ours.items():
            assert value / theirs[round_id] == pytest.approx(truth(key) / truth(base))
    # the offsets show node 3; each GPU ran one process, so one window of a config each: no
    # floor to judge it against, and none is named apart (docs/ray.md: per-node offsets)
    offsets = gpu_offsets(ConfigSamples(tuple(sampled.windows[key])) for key in cells)
    assert len(offsets) == 64
    for found in offsets:
        slow = found.gpu.startswith("node3:")
        assert found.offset == pytest.approx(0.04 if slow else 0.0, abs=1e-9)
        assert found.floor is None and not found.apart


# ---- (b) the driver's work per cell ---------------------------------------------------------


def test_the_driver_holds_one_window_per_cell_and_process_and_records_each_once():
    """The rounds' driver: one on_round per process; each call adds windows only to the cells
    of that process (whole groups), and the driver ends holding cells x rounds windows."""
    cells, groups = matrix()
    held, calls, added = Counter(), [], []

    def on_round(sampled):
        now = Counter({key: len(windows) for key, windows in sampled.windows.items()})
        changed = {key for key in now if now[key] != held[key]}
        assert all(now[key] == held[key] + 1 for key in changed)  # one window each
        calls.append(1)
        added.append(changed)
        held.clear()
        held.update(now)

    runner = FakeCluster([64, 48])
    sampled = sample(70, runner, on_round)
    assert len(calls) == sampled.processes == 112
    assert sorted(map(sorted, added)) == sorted(sorted(keys) for _, keys in runner.processes)
    assert sum(len(keys) for keys in added) == len(cells) * 70  # each window recorded once
    assert sum(len(windows) for windows in sampled.windows.values()) == len(cells) * 70
    for keys in added:
        for group in {groups[k] for k in keys}:
            assert {k for k in cells if groups[k] == group} <= keys


class ClusterExecutor:
    """A sweep executor of 8 hosts x 8 GPUs that runs nothing: each cell starts on the next
    GPU and fails at once (the driver's bookkeeping is what is counted)."""

    def describe(self) -> str:
        return "a fake cluster"

    def run(self, jobs, on_start, on_done) -> None:
        gpus = cluster_gpus()
        for index, job in enumerate(jobs):
            node, gpu = gpus[index % len(gpus)].split(":")
            on_start(job, {"node": node, "gpu": gpu, "worker": f"fake pid {index}"})
            on_done(job, outcome("user-error", "stopped at the cell", 2, 0.0))


def test_the_sweep_driver_writes_its_manifest_twice_a_cell(tmp_path, monkeypatch):
    """sweep.json is written whole before the first cell, when a cell starts and when it
    ends, and once at the end: 2 N + 2 writes for N cells, each under MANIFEST_BYTES_PER_CELL
    a cell."""
    from profiler.sweep import plan as sweep_plan, runner as sweep_run

    monkeypatch.chdir(tmp_path)
    p = sweep_plan.plan(
        ",".join(BACKENDS[:3]),
        ",".join(map(str, SIZES)),
        {"model": "tests.tiny_models:conv_net"},
        name="cluster",
    )
    monkeypatch.setattr(sweep_run, "make_executor", lambda p: ClusterExecutor())
    sizes = []
    real = sweep_run.runs.write_manifest

    def counted(folder, manifest):
        real(folder, manifest)
        sizes.append((folder / "sweep.json").stat().st_size)

    monkeypatch.setattr(sweep_run.runs, "write_manifest", counted)
    done = sweep_run.run_sweep(p, say=lambda line: None)
    cells = len(p.cells)
    assert cells == 24 and done.ran == cells
    assert len(sizes) == 2 * cells + 2
    assert max(sizes) <= MANIFEST_BYTES_PER_CELL * cells
    manifest = json.loads((p.sweep_dir / "sweep.json").read_text())
    assert {(c["node"], c["gpu"]) for c in manifest["cells"].values()} == {
        tuple(g.split(":")) for g in cluster_gpus()[:cells]
    }


def test_a_real_sweeps_manifest_is_about_a_kilobyte_a_cell():
    manifest = Path(__file__).parent / "fixtures/h100x4_sweep/runs/g4/sweep.json"
    cells = len(json.loads(manifest.read_text())["cells"])
    assert cells == 12 and manifest.stat().st_size <= MANIFEST_BYTES_PER_CELL * cells


# ---- (c) the Ray executor on a fake Ray of 8 hosts x 8 GPUs ---------------------------------


class FakeGenerator:
    """A streaming task's generator: the items it has yielded so far."""

    def __init__(self, job, runner):
        self.job, self.runner = job, runner
        self.items: deque = deque()
        self.place = None

    def __next__(self):
        if not self.items:
            raise StopIteration
        return self.items.popleft()


class FakeRay:
    """As much of Ray as the executor's driver loop uses, on hosts x GPUs: a task waits for a
    free GPU (the least busy node first, standing in for Ray's placement), yields where it
    runs, and, when the driver finds no item ready, the oldest running task ends."""

    def __init__(self, hosts=HOSTS, per_host=PER_HOST):
        self.free = {f"node{h}": list(range(per_host)) for h in range(hosts)}
        self.per_host = per_host
        self.queue: deque = deque()
        self.running: deque = deque()
        self.waits: list[int] = []
        self.options: dict = {}
        self.placed: dict[str, tuple[str, str]] = {}
        self.busy: set = set()
        self.most_at_once = 0
        self.exceptions = SimpleNamespace(OutOfMemoryError=MemoryError, RayError=RuntimeError)

    def is_initialized(self):
        return True

    def cluster_resources(self):
        return {"GPU": float(len(self.free) * self.per_host), "CPU": 32.0 * len(self.free)}

    def nodes(self):
        return [{"Alive": True} for _ in self.free]

    def remote(self, **options):
        self.options = options

        def declared(function):
            return SimpleNamespace(remote=self._submit)

        return declared

    def _submit(self, job, shared_fs, runner):
        generator = FakeGenerator(job, runner)
        self.queue.append(generator)
        return generator

    def _place(self):
        while self.queue and any(self.free.values()):
            node = max(self.free, key=lambda n: len(self.free[n]))
            generator = self.queue.popleft()
            gpu = self.free[node].pop(0)
            generator.place = (node, str(gpu))
            assert generator.place not in self.busy
            self.busy.add(generator.place)
            self.most_at_once = max(self.most_at_once, len(self.busy))
            self.placed[generator.job.name] = generator.place
            generator.items.append({"node": node, "gpu": str(gpu), "worker": "fake"})
            self.running.append(generator)

    def _end_one(self):
        generator = self.running.popleft()
        node, gpu = generator.place
        self.busy.discard(generator.place)
        self.free[node].append(int(gpu))
        generator.items.append((generator.runner(generator.job), payload(generator.job)))

    def wait(self, refs, num_returns=1, timeout=None):
        self.waits.append(len(refs))
        self._place()
        if not any(g.items for g in refs) and self.running:
            self._end_one()
        ready = [g for g in refs if g.items][:num_returns]
        return ready, [g for g in refs if g not in ready]

    def get(self, item):
        return item

    def cancel(self, generator, force=False):
        raise AssertionError("nothing is cancelled here")


def payload(job: CellJob) -> dict:
    """A cell's archives as a task sends them home: its run folder and its log."""
    buffer = io.BytesIO()
    data = json.dumps({"name": job.name}).encode()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        entry = tarfile.TarInfo(f"{job.name}/result.json")
        entry.size = len(data)
        tar.addfile(entry, io.BytesIO(data))
    return {"runs": buffer.getvalue(), "tb": None, "log": f"log of {job.name}\n".encode()}


def test_the_ray_driver_loop_on_64_fake_gpus(tmp_path, monkeypatch):
    """160 cells on a fake Ray of 64 GPUs: each cell asks for one GPU and a fresh worker,
    starts and ends once, is recorded where Ray put it, and comes home whole; the driver takes
    two turns a cell, each looking at no more than the cells still out."""
    from profiler.sweep.executors import ray as ray_executor

    fake = FakeRay()
    monkeypatch.setattr(ray_executor, "import_ray", lambda: fake)
    sweep = tmp_path / "runs" / "s"
    jobs = [
        CellJob(
            name=f"cell{i}",
            config={"runs_dir": str(sweep), "tb_dir": str(tmp_path / "tb" / "s")},
            log_path=str(sweep / "logs" / f"cell{i}.log"),
        )
        for i in range(160)
    ]
    started, done, said = {}, {}, []

    def on_start(job, where):
        assert job.name not in started
        started[job.name] = where

    def on_done(job, ended):
        assert job.name not in done
        done[job.name] = ended

    executor = ray_executor.RayExecutor(
        say=said.append, runner=lambda job: outcome("ok", None, 0, 1.0)
    )
    executor.run(jobs, on_start, on_done)
    assert said == [
        "ray: 8 node(s), 64 GPU(s), 256 CPU(s); one task per cell on one GPU; "
        "results brought home through Ray's object store"
    ]
    assert fake.options["num_gpus"] == 1 and fake.options["max_calls"] == 1
    assert fake.options["max_retries"] == 0 and fake.options["num_returns"] == "streaming"
    assert set(done) == set(started) == {job.name for job in jobs}
    assert fake.most_at_once == 64
    assert {fake.placed[name] for name in done} == {tuple(g.split(":")) for g in cluster_gpus()}
    for name, ended in done.items():  # recorded where Ray put it
        assert (
            (ended.node, ended.gpu)
            == fake.placed[name]
            == (started[name]["node"], started[name]["gpu"])
        )
        assert json.loads((sweep / name / "result.json").read_text()) == {"name": name}
        assert (sweep / "logs" / f"{name}.log").read_text() == f"log of {name}\n"
    # the driver's loop: two turns a cell (where it started, its outcome), each looking at
    # the cells still out, never more than were submitted
    assert len(fake.waits) == 2 * len(jobs)
    assert max(fake.waits) == len(jobs) and fake.waits == sorted(fake.waits, reverse=True)
    assert not list((tmp_path / "runs").rglob(".*staging*"))
