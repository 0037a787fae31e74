"""syps: a data-versioned experiment tracker for LLM sycophancy research.

Four study designs ("protocols") in ``syps/protocols/<name>/`` (``cues``: SyPS, the same
situation under eight social cues; ``pushback``; ``discernment``; ``betting``) run through one
pipeline on a shared core (``syps/core/``); ``stages/`` holds the thin DVC entry points and
``syps.cli`` the command line.
"""

__version__ = "0.1.0"
