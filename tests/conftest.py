"""Shared fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One GGUF conversion of the embedded model for the whole test session."""
    return tmp_path_factory.mktemp("syps-cache")
