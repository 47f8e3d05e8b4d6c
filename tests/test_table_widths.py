"""Every table readable at 80, 100 and 120 columns: a number the 160-column output shows is
either shown whole at a narrower width or left out with its column, never cut."""

import re

import pytest

from profiler.commands.summarize import VIEWS
from tests.conftest import FIXTURES

H200 = FIXTURES / "h200" / "runs"
WIDTHS = (80, 100, 120)
#: a number standing alone in a cell or a line: bounded by spaces, table rules or the line ends
NUMBER = re.compile(r"(?<![^\s│┃|(])[-+]?\d{1,3}(?:,\d{3})*(?:\.\d+)?(?=[\s│┃|)%x]|$)")


def numbers(text: str) -> set[str]:
    return set(NUMBER.findall(text))


def assert_numbers_whole(render):
    wide = render(160)
    assert wide.strip()
    for width in WIDTHS:
        narrow = render(width)
        # every line fits, but the `next:` commands and a path on a line of its own (to copy
        # whole)
        assert max(len(line) for line in narrow.splitlines() if not whole(line)) <= width
        assert not re.search(r"\d…", narrow) or re.search(r"\d…", wide), width
        cut = {n for n in numbers(narrow) - numbers(wide) if not in_a_name(n, wide)}
        assert not cut, (width, cut)


def whole(line: str) -> bool:
    """A line printed whole at any width: a `next:` command, or one path alone."""
    alone = line.strip()
    return line.startswith("next: ") or ("/" in alone and " " not in alone)


def in_a_name(token: str, wide: str) -> bool:
    """Digits of a long name (``tilesize256x128``, ``kernel<8, …``) that fold onto a line of
    their own at a narrow width."""
    t = re.escape(token.rstrip(","))
    return bool(re.search(rf"[A-Za-z<_:]{t}|{t}[A-Za-z_>,]", wide))


@pytest.fixture
def at_width(cli, monkeypatch):
    def render(*args):
        def at(width):
            monkeypatch.setenv("COLUMNS", str(width))
            done = cli(*args)
            assert done.code == 0, done.stderr
            return done.stdout

        return at

    return render


#: the views that need a run recorded with an option of its own: one such H200 run each
RECORDED_WITH = {
    "memory": FIXTURES / "memory_h200" / "runs" / "pytorch_fp16_bs2_mem_llama_tiny_gen",
    "modules": FIXTURES / "modules_h200" / "runs" / "pytorch_fp16_bs2_mod_llama_tiny_gen",
    "snapshot": FIXTURES / "snapshot_h200" / "runs" / "pytorch_fp16_bs2_mh_llama_tiny_gen",
}


@pytest.mark.parametrize("view", [v for v in VIEWS if v not in ("layers", "phases")])
def test_summarize_views(at_width, view):
    run = RECORDED_WITH.get(view, H200 / "pytorch_fp16_bs8")
    assert_numbers_whole(at_width("summarize", str(run), "--view", view, "--top", "8"))


def test_summarize_phases(at_width):
    generated = FIXTURES / "h100_generate" / "runs" / "inductor_fp16_bs1_fixture"
    assert_numbers_whole(at_width("summarize", str(generated), "--view", "phases", "--top", "8"))


def test_columns_left_out_are_named_and_the_spread_goes_before_tensor_cores(at_width):
    """At 100 columns the kernel table leaves out min and max (not the Tensor Core column) and
    one line names what it left out; at 160 nothing is left out, and no line says so."""
    render = at_width(
        "summarize", str(H200 / "pytorch_fp16_bs8"), "--view", "kernels", "--top", "5"
    )
    narrow = render(100)
    kernels = narrow.split("Kernels by total time")[1].split("Kernel launch")[0]
    table, left_out = kernels.split("columns left out for width: ")
    assert "Tensor" in table and "median" in table and "min" not in table and "max" not in table
    assert " ".join(left_out.split()).startswith(
        "min µs, max µs, launched by (operator) (widen the terminal, or use --json)"
    )
    assert "left out" not in render(160)


def test_summarize_trt_layers(at_width):
    assert_numbers_whole(at_width("summarize", str(H200 / "ttrt_fp16_bs8"), "--top", "8"))


def test_compare(at_width):
    assert_numbers_whole(
        at_width(
            "compare", str(H200 / "pytorch_fp16_bs8"), str(H200 / "ttrt_fp16_bs8"), "--top", "8"
        )
    )


def test_kernel_totals_survive_at_80(at_width):
    text = at_width("summarize", str(H200 / "pytorch_fp16_bs8"), "--view", "kernels", "--top", "5")(
        80
    )
    kernels = text.split("Kernels by total time")[1].split("Kernel launch")[0]
    assert "total" in kernels and "729.0" in kernels


def rendered(draw, width: int) -> str:
    """What ``draw(console)`` prints on a console ``width`` columns wide."""
    import io

    from rich.console import Console

    console = Console(file=io.StringIO(), width=width, color_system=None)
    draw(console)
    return console.file.getvalue()


def test_sweep_table():
    from profiler.analysis.benchmark import benchmark_rows
    from profiler.report.benchmark_view import print_benchmark
    from profiler.runs.manifest import SweepCell, SweepManifest

    sweep = FIXTURES / "h100_engines" / "runs" / "engines_resnet50"
    names = sorted(p.name for p in sweep.iterdir() if p.is_dir())
    cells = {n: SweepCell(backend=n.removesuffix("_bs8"), batch_size=8, status="ok") for n in names}
    backends = [n.removesuffix("_bs8") for n in names]
    manifest = SweepManifest(
        options={},
        model="resnet50",
        baseline=backends[0],
        backends=backends,
        batch_sizes=[8],
        cells=cells,
    )
    rows = benchmark_rows(sweep, manifest)

    def render(width):
        return rendered(lambda c: print_benchmark(rows, manifest, c), width)

    assert_numbers_whole(render)
    for width in WIDTHS:  # backend names whole, not `pytorc…`
        assert all(f"│ {backend} " in render(width) for backend in backends), width


@pytest.mark.parametrize("run", ["pytorch_fp16_bs8", "ttrt_fp16_bs8"])
def test_run_result_view(run):
    from profiler.report.run_view import print_result
    from profiler.runs.result import read_result

    result = read_result(H200 / run / "result.json")
    assert_numbers_whole(lambda width: rendered(lambda c: print_result(result, c), width))


def test_sweep_progress_bar_has_an_eta():
    import io

    from rich.console import Console

    from profiler.report.sweep_view import cell_progress

    console = Console(file=io.StringIO(), force_terminal=True, width=100, color_system=None)
    with cell_progress(console, 3) as (_, advance):
        advance()
    assert "1/3" in console.file.getvalue() and "eta" in console.file.getvalue()


def test_sweep_verdicts_never_break_inside_a_word():
    """At 80 columns the verdict and CV cells wrap between words ("undeci/ded" and
    "[1.18-/1.23]" were cut inside them), and the line under the table names what was left
    out."""
    from profiler.analysis.benchmark import benchmark_rows
    from profiler.report.benchmark_view import print_benchmark
    from profiler.runs.manifest import read_manifest

    sweep = FIXTURES / "h100_sweep" / "runs" / "gpu_sweep"
    manifest = read_manifest(sweep)
    rows = benchmark_rows(sweep, manifest)

    def render(width):
        return rendered(lambda c: print_benchmark(rows, manifest, c), width)

    assert_numbers_whole(render)
    wide = set(render(400).replace("│", " ").split())
    for width in WIDTHS:
        text = render(width)
        table = text.split("└")[0].split("┩")[1]  # the body, headers aside
        assert set(table.replace("│", " ").split()) <= wide, width
        assert "[3.16-19.70]" in table and "faster" in table and "bimodal" in table
        assert "columns left out for width: " in text


def test_whole_columns_wrap_between_words_when_nothing_is_left_to_leave_out():
    """A FitTable whose two verdict-like columns cannot have one line a cell even with every
    optional column left out: they wrap between words ("undeci/ded" was cut inside one), and
    the optional column comes back where the narrower verdicts leave room for it."""
    from profiler.report.console import FitTable

    def draw(console):
        table = FitTable()
        table.add_column("backend", number=True, justify="left")
        for header in ("p50 ms", "p99 ms", "samples/s"):
            table.add_column(header, number=True)
        for header in ("latency speedup [95 %] verdict", "GPU-time speedup [95 %] verdict"):
            table.add_column(header, whole=True)
        table.add_column("processes", number=True, optional=True)
        for cells in (
            ("pytorch_fp16", "8.024", "11.128", "117.1"),
            ("ttrt_fp16", "1.016", "1.109", "4,985.3"),
        ):
            table.add_row(*cells, "1.21x [1.18-1.23] undecided", "1.19x [1.17-1.22] faster", "5")
        console.print(table)

    wide = set(rendered(draw, 200).split())
    for width in (80, 90):
        text = rendered(draw, width)
        assert max(len(line) for line in text.splitlines()) <= width
        body = text.split("┩")[1].split("└")[0].replace("│", " ")
        assert set(body.split()) <= wide, width
        assert "undecided" in body and "[1.18-1.23]" in body
    assert "columns left out for width: processes" in rendered(draw, 80)
    assert "processes" in rendered(draw, 90) and "left out" not in rendered(draw, 90)
