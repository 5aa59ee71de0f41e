"""Rendering questions, outcomes and reviews as Block Kit (adapters.slack.render)."""
