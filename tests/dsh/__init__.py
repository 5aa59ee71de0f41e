"""The DeepSeek Harness client (adapters.dsh)."""
