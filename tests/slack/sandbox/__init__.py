"""The local Slack sandbox, also the tests' Slack (adapters.slack.sandbox)."""
