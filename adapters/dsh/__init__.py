"""The dsh web host as a question source: the bot as a connected client of a running host.

``protocol`` is the wire (frames, responses, receipts, the host's answer check), pure and
I/O-free.
"""
