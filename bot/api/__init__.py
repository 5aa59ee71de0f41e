"""The HTTP API (``/v1``): routes (``gateway``), request bodies, answers, tokens, audit export.

It may import the Slack provider's public surface, adapters.httpguard and the seam;
never the app or the settings.
"""
