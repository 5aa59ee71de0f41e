"""The HTTP API (bot.api)."""
