"""sweep --processes under --executor ray: each process of a round is a Ray task on one of the
cluster's GPUs. On a fake Ray of GPUs: the slots are the cluster's GPUs, a window records the
GPU Ray gave its process (node:GPU on several nodes), the cells a verdict compares share one
process and so one GPU, Ctrl-C cancels the task. On a real local Ray (CPU): a round runs."""

import threading
from collections import Counter
from types import SimpleNamespace

import pytest

from profiler.sweep import rounds
from profiler.sweep.executors import ray as ray_executor

from .test_rounds_gpus import matrix


class FakeRay:
    """As much of Ray as RayRounds uses: a task takes a free GPU of a node when submitted (no
    two tasks on one GPU at once), runs the round at ``get``, and frees the GPU."""

    def __init__(self, nodes=1, per_node=4):
        self.free = [(f"node{n}", str(g)) for n in range(nodes) for g in range(per_node)]
        self.lock = threading.Lock()
        self.busy: set = set()
        self.most_at_once = 0
        self.cancelled: list = []
        self.options: dict = {}
        self.processes: list[tuple[tuple[str, str], list[str]]] = []
        self.exceptions = SimpleNamespace(GetTimeoutError=TimeoutError, RayError=RuntimeError)
        self.interrupt = False

    def remote(self, **options):
        self.options = options
        return lambda function: SimpleNamespace(remote=self._submit)

    def nodes(self):
        return [{"Alive": True} for _ in {node for node, _ in self.free}]

    def cluster_resources(self):
        return {"GPU": float(len(self.free)), "CPU": 64.0}

    def _submit(self, cells):
        with self.lock:
            place = self.free.pop(0)
            self.busy.add(place)
            self.most_at_once = max(self.most_at_once, len(self.busy))
        return SimpleNamespace(cells=cells, place=place)

    def get(self, ref, timeout=None):
        if self.interrupt:
            raise KeyboardInterrupt
        node, gpu = ref.place
        keys = [key for key, _ in ref.cells]
        with self.lock:
            self.processes.append((ref.place, keys))
            self.busy.discard(ref.place)
            self.free.append(ref.place)
        found = {
            key: {"latencies_ms": [1.0 + int(gpu) / 100] * 3, "device": "fake"} for key in keys
        }
        return found, {"node": node, "gpu": gpu, "worker": "fake"}

    def cancel(self, ref, force=False):
        self.cancelled.append((ref, force))


def test_the_rounds_run_as_ray_tasks_one_per_gpu_and_record_the_gpu_each_ran_on():
    fake = FakeRay(nodes=1, per_node=4)
    runner = ray_executor.RayRounds(fake, {"num_gpus": 1, "num_cpus": 1})
    assert fake.options["num_gpus"] == 1 and fake.options["max_calls"] == 1  # a fresh worker
    slots = runner.slots()
    assert len(slots) == 4
    cells, groups = matrix()
    got = rounds.sample(
        cells, {}, 5, say=lambda _: None, gpus=slots, groups=groups, round_runner=runner
    )
    assert fake.most_at_once <= 4 and not got.errors
    assert all(len(got.windows[key]) == 5 for key in cells)
    for _, keys in fake.processes:  # whole comparison groups in a process: paired on one GPU
        assert set(Counter(groups[key] for key in keys).values()) == {3}
    recorded = {w.gpu for key in cells for w in got.windows[key]}
    assert recorded <= {"0", "1", "2", "3"} and len(recorded) > 1
    for key in cells:  # the window says the GPU its process ran on
        for window in got.windows[key]:
            assert window.values("latency")[0] == pytest.approx(1 + int(window.gpu) / 100)


def test_on_several_nodes_a_window_names_node_and_gpu():
    fake = FakeRay(nodes=2, per_node=2)
    runner = ray_executor.RayRounds(fake, {"num_gpus": 1, "num_cpus": 1})
    found = runner([("a", {}), ("b", {})])
    assert found["a"]["gpu"] == found["b"]["gpu"] == "node0:0"
    assert runner.slot_name("ray-1") == "a Ray task's GPU"


def test_ctrl_c_while_a_round_runs_cancels_its_task():
    fake = FakeRay()
    fake.interrupt = True
    runner = ray_executor.RayRounds(fake, {"num_gpus": 1, "num_cpus": 1})
    with pytest.raises(KeyboardInterrupt):
        runner([("a", {})])
    assert len(fake.cancelled) == 1 and fake.cancelled[0][1] is True


def test_a_failed_round_task_is_each_cells_one_line_reason():
    fake = FakeRay()

    def broken(ref, timeout=None):
        raise RuntimeError("worker died\nmore")

    fake.get = broken
    found = ray_executor.RayRounds(fake, {"num_gpus": 1})([("a", {}), ("b", {})])
    assert found == {
        key: "the round's Ray task failed: RuntimeError: worker died" for key in ("a", "b")
    }
