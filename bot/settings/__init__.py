"""The bot's settings: ``config.Settings``, one part per concern, and their checks. It imports
the seam and ``bot.logs`` only."""
