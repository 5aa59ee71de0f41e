"""Our Block Kit checks and ids (adapters.slack.blockkit)."""
