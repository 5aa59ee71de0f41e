"""The bot's settings (bot.settings)."""
