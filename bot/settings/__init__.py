"""The bot's settings: ``config.Settings``, one part per concern, and their checks. It imports
the seam, ``bot.logs``, ``adapters.urls`` and ``adapters.httpguard`` (``is_loopback``) only."""
