"""Sycophancy study designs ("protocols"), one folder each, every folder of one shape:
``__init__.py`` exporting ``PROTOCOL``, ``params.py`` (its typed params and their defaults),
``protocol.py`` (the class), then its own modules (prompts, parse, labels, metrics, figures,
items) as it needs them. Each implements ``syps.core.protocol.Protocol``; the core knows none of
them by name. They are listed in one place, ``syps.registry``."""
