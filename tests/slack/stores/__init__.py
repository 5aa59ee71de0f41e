"""The pending stores: memory, SQLite, Redis (adapters.slack.stores)."""
