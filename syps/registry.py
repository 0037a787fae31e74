"""The registry: every protocol syps runs, by name, in the order listings show them.

The one place in code a protocol is named (besides its own folder): adding a protocol adds its
import and a line here, and its block under ``protocols`` in params.yaml. The CLI, ``syps
plan`` and the mlflow stage use the whole registry; a per-protocol stage imports its own
protocol alone (``syps.stage.protocol_named``), which is what dvc.yaml declares it depends on.
"""

from __future__ import annotations

from typing import Any

from syps.core.protocol import Protocol
from syps.protocols import betting, cues, discernment, pushback

PROTOCOLS: dict[str, Protocol[Any]] = {
    "cues": cues.PROTOCOL,
    "pushback": pushback.PROTOCOL,
    "discernment": discernment.PROTOCOL,
    "betting": betting.PROTOCOL,
}
# The protocol a command means when none is named (`syps score`, `syps judge`, `syps summary`).
DEFAULT_PROTOCOL = "cues"
