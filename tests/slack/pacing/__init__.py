"""Slack's rate limits: the scheduler and the shared budget (adapters.slack.pacing)."""
