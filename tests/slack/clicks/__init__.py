"""A click from the listener to the resolved waiter (adapters.slack.clicks)."""
