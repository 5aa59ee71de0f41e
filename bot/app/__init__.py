"""The bot process: wiring (``runtime``), Socket Mode, ``/healthz``, ports, scopes, heap.

The top layer: it may import the settings, the HTTP API, the adapters and the seam.
"""
