"""SyPS (Sycophancy Prompt Sensitivity): the same situation under eight social cues P0-P7.

The protocol is ``PROTOCOL`` (``protocol.CuesProtocol``); its params are ``params.CuesParams``.
"""

from syps.protocols.cues.protocol import PROTOCOL

__all__ = ["PROTOCOL"]
