"""SyPS: Sycophancy Prompt Sensitivity.

Measures how an LLM's sycophancy shifts when the same situation is told with different social
cues. The package is a pure, typed core; ``stages/`` holds the thin DVC entry points.
"""

__version__ = "0.1.0"
