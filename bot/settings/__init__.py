"""The bot's settings: ``config.Settings`` composed of one part per concern, their checks.

It may import the seam and ``bot.logs`` only; the app reads it, nothing below does.
"""
