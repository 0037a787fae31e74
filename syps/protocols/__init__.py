"""Sycophancy study designs ("protocols"), one folder each.

Each protocol folder holds its whole logic: items and their loaders, the rule parsers that turn a
response into a label record, and the pure metrics. The shared machinery (store, backends,
bootstrap, tracking) knows no protocol by name.
"""
