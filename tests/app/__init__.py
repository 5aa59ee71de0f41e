"""python -m bot: wiring, start, stop, Socket Mode, HTTP (bot.app)."""
