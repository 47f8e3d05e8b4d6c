"""Entry point: ``python profile.py --help``.

This file sits at the repository root, where it shadows the standard library's ``profile``
module whenever the root is on ``sys.path`` (``cProfile`` imports ``profile``, and
``torch._dynamo`` imports ``cProfile``). When it is imported under the name ``profile`` it
therefore loads the standard library's module and puts that in its place, so ``cProfile``
keeps working from the repository root.
"""

import sys

if __name__ == "__main__":
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
else:  # imported as ``profile``: hand over to the standard library module of that name
    import importlib.util as _util
    import os as _os
    import sysconfig as _sysconfig

    _spec = _util.spec_from_file_location(
        __name__, _os.path.join(_sysconfig.get_paths()["stdlib"], "profile.py")
    )
    assert _spec is not None and _spec.loader is not None  # a path ending in .py
    _stdlib_profile = _util.module_from_spec(_spec)
    sys.modules[__name__] = _stdlib_profile
    _spec.loader.exec_module(_stdlib_profile)
    globals().update(_stdlib_profile.__dict__)
