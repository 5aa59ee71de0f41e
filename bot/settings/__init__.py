"""The bot's settings: ``config.Settings``, one part per concern, and their checks. It imports
the seam, ``bot.logs`` and ``adapters.urls`` only."""
