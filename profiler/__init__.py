"""Kernel-level profiling harness for GPU inference.

Collection (``harness``, ``backends``, ``models``) imports torch; analysis (``trace``,
``report``) never does, so traces can be summarized on any machine.
"""

__version__ = "0.1.0"
