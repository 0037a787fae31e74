"""The machinery every protocol shares, naming none of them: params, the response store, the
backends, the conversation runner, the judge, labels, statistics, plotting, the pipeline's
stages, tracking, planning, compare and audit. Protocols are found through the registry,
``syps.protocols.PROTOCOLS``."""
