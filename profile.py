"""Entry point: ``python profile.py --help`` (installed: ``infer-profile --help``).

This file sits at the repository root, where it shadows the standard library's ``profile``
module whenever the root is on ``sys.path`` (``cProfile`` imports ``profile``, and
``torch._dynamo`` imports ``cProfile``). So the command line is only what runs it as a script;
under any other name it stands in for the standard library's module:

- ``import profile``: it loads the standard library's module and puts that in its place, so
  ``cProfile`` keeps working from the repository root;
- ``python -m profile``: it runs the standard library's command line (the deterministic
  profiler), not this program's;
- any other name (``__mp_main__``, as a spawned or forkserver worker of multiprocessing runs
  its parent's main script again): nothing.
"""

import sys

# run as a script (`python profile.py`, or `python -m cProfile profile.py`), not as a module
# named profile (`python -m profile`): the command line
if __name__ == "__main__" and getattr(globals().get("__spec__"), "name", None) != "profile":
    import time

    _began = time.perf_counter()  # the run's imports phase starts here (profiler.runs.phases)
    from profiler import signals

    signals.install()  # SIGTERM and SIGHUP: one line and 143/129 from here on, as Ctrl-C's 130
    try:
        from profiler.collect import bytecode
        from profiler.runs import phases

        bytecode.keep_bytecode()  # before torch: see profiler/collect/bytecode.py
        phases.process_mark = _began
        from profiler.cli.app import main
    except KeyboardInterrupt as _stop:  # while starting: nothing was begun
        if not signals.quiet_stop():
            _by = signals.describe(_stop)
            print(f"interrupted{'' if _by == 'Ctrl-C' else ' by ' + _by}", file=sys.stderr)
        sys.exit(signals.exit_code(_stop))

    code = main()
    # Tearing torch down at exit (its CUDA context, thousands of modules) took about a second
    # of an eager run on the H100. Once the output is flushed nothing of ours is left to do, so
    # the process ends without that teardown, unless something that needs its exit hooks was
    # loaded (Inductor's compile workers, Ray).
    if "torch" in sys.modules and not {"torch._inductor", "ray"} & sys.modules.keys():
        import os

        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # a reader gone (`| head`), a stream closed
                pass
        os._exit(code)
    sys.exit(code)
elif __name__ in ("__main__", "profile"):  # the standard library's module of that name
    import os as _os
    import sysconfig as _sysconfig

    _stdlib_path = _os.path.join(_sysconfig.get_paths()["stdlib"], "profile.py")
    if __name__ == "__main__":  # python -m profile: its command line
        import runpy as _runpy

        _runpy.run_path(_stdlib_path, run_name="__main__")
    else:  # import profile: the module, in this one's place
        import importlib.util as _util

        _spec = _util.spec_from_file_location(__name__, _stdlib_path)
        assert _spec is not None and _spec.loader is not None  # a path ending in .py
        _stdlib_profile = _util.module_from_spec(_spec)
        sys.modules[__name__] = _stdlib_profile
        _spec.loader.exec_module(_stdlib_profile)
        globals().update(_stdlib_profile.__dict__)
