"""The seam (bot.questions): models, validation, the service, the tool."""
