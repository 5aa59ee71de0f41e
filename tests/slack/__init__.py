"""The Slack provider (adapters.slack), one folder per subpackage."""
