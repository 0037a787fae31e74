"""Sycophancy study designs ("protocols"), one folder each, and the registry of them.

Every folder has one shape: ``__init__.py`` exporting ``PROTOCOL`` (a
``syps.core.protocol.Protocol``), ``params.py`` (its typed params and their defaults),
``protocol.py`` (its slots put together), then its own modules (prompts, parse, labels, metrics,
figures, items) as it needs them. The core knows none of them by name.

``PROTOCOLS`` is the one registry: each protocol's name, in the order listings show them, and
the package that holds it. Adding a protocol adds its line here and its block under
``protocols`` in params.yaml. An entry is imported when first looked up, so a per-protocol stage
(``syps.stage``) imports its own protocol alone: the code dvc.yaml declares it depends on.
"""

from syps.core.protocol import Registry

PROTOCOLS = Registry(
    {
        "cues": "syps.protocols.cues",
        "pushback": "syps.protocols.pushback",
        "discernment": "syps.protocols.discernment",
        "betting": "syps.protocols.betting",
        "adaptive": "syps.protocols.adaptive",
    }
)
# The protocol a command means when none is named (`syps score`, `syps judge`, `syps summary`).
DEFAULT_PROTOCOL = "cues"
