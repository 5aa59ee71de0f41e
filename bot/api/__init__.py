"""The HTTP API (``/v1``): routes, bodies, answers, tokens, audit export, OpenAPI document. It
may import the Slack provider's public surface, ``adapters.httpguard`` and the seam."""
