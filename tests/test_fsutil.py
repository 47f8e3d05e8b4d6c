"""The one atomic-write family: a writer that fails leaves neither the file nor a temp file."""

import pytest

from profiler.fsutil import move_into, write_bytes_atomic, write_text_atomic, write_with


def test_text_and_bytes_replace_whole(tmp_path):
    path = tmp_path / "sub" / "a.txt"
    write_text_atomic(path, "one\r\n")
    assert path.read_bytes() == b"one\r\n"  # no newline translation
    write_bytes_atomic(path, b"two")
    assert path.read_bytes() == b"two"
    assert [p.name for p in path.parent.iterdir()] == ["a.txt"]


def test_failed_writer_leaves_the_old_file_and_no_temp(tmp_path):
    path = tmp_path / "plot.png"
    path.write_text("old")

    def half_then_fail(tmp):
        tmp.write_text("half")
        raise RuntimeError("writer failed")

    with pytest.raises(RuntimeError):
        write_with(path, half_then_fail)
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["plot.png"]


def test_move_into(tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "x.log").write_text("x")
    moved = move_into(tmp_path / "run", [scratch / "x.log"])
    assert moved == [tmp_path / "run" / "x.log"] and not (scratch / "x.log").exists()
