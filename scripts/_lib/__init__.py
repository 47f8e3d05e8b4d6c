"""What the scripts share, kept here so that no script imports tests/ (or another script's
insides). A module whose name starts with ``_`` is no command: `python scripts/<name>.py` runs
the scripts, each of which finds this package beside it (``from _lib.floors import ...``); a
test puts scripts/ on ``sys.path`` to read it.

floors: the package's floors and their rules, and the imports of every module read with ast
(tests/test_floors.py holds the package to the rules; scripts/architecture_counts.py counts
against them).
"""
