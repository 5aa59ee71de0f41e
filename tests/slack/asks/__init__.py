"""An ask's lifecycle: posting, waiting, endings, deadlines (adapters.slack.asks)."""
