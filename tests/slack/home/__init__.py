"""The Home tab, "Waiting for you" (adapters.slack.home)."""
