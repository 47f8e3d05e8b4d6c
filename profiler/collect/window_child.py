"""``python -m profiler.collect.window_child``: the fresh process of a repeat window or of a
sampling round (profiler.collect.repeat_window run as the main module), with its bytecode kept
first (profiler.collect.bytecode): the child is the first of its process to import torch, and
without this compiled every module again where the environment writes no bytecode."""

import runpy

from profiler.collect import bytecode

bytecode.keep_bytecode()
runpy.run_module("profiler.collect.repeat_window", run_name="__main__", alter_sys=True)
