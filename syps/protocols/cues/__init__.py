"""SyPS (Sycophancy Prompt Sensitivity): the same situation under eight social cues P0-P7.

The protocol is ``protocol.PROTOCOL``; its params are ``params.CuesParams``.
"""
