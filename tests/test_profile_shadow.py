"""profile.py at the repository root must not break the standard library's profile/cProfile:
only a run as a script is this program's command line; under the name ``profile`` it is the
standard library's module (import) or command line (``-m``), under any other name nothing."""

import json
import runpy

from tests.conftest import ROOT, run_python


def test_cprofile_works_from_repo_root():
    done = run_python("-c", "import cProfile; cProfile.run('1+1')")
    assert done.returncode == 0, done.stderr
    assert "function calls" in done.stdout


def test_import_profile_gives_the_standard_library_module():
    done = run_python(
        "-c", "import profile, sys; print(profile.__file__); print(hasattr(profile, 'Profile'))"
    )
    assert done.returncode == 0, done.stderr
    path, has_profile = done.stdout.split()
    assert path != str(ROOT / "profile.py") and has_profile == "True"


def test_python_m_profile_from_repo_root_is_the_standard_librarys_profiler(tmp_path):
    script = tmp_path / "hello.py"
    script.write_text("print('hello from the script')\n")
    done = run_python("-m", "profile", str(script))
    assert done.returncode == 0, done.stderr
    assert "hello from the script" in done.stdout and "function calls" in done.stdout


def test_run_again_as_a_workers_main_it_does_nothing():
    """multiprocessing's spawn and forkserver workers run the parent's main script again under
    the name __mp_main__: no command line, and no standard library module in its place."""
    found = runpy.run_path(str(ROOT / "profile.py"), run_name="__mp_main__")
    assert found["__file__"] == str(ROOT / "profile.py")
    assert "Profile" not in found and "main" not in found


def test_inductor_run_from_repo_root_has_no_circular_import(tmp_path):
    # torch.compile imports torch._dynamo, which imports cProfile, which imports profile
    done = run_python(
        "profile.py",
        "run",
        "--backend",
        "inductor_fp32",
        "--model",
        "tests.tiny_models:conv_net",
        "--iters",
        "2",
        "--timed-warmup",
        "0",
        "--active",
        "1",
        "--json",
        "--runs-dir",
        str(tmp_path / "runs"),
        "--tb-dir",
        str(tmp_path / "tb_logs"),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "circular import" not in done.stderr
    result = json.loads(done.stdout)
    assert result["backend"]["notes"]["compile_mode"] == "default"
