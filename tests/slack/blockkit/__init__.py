"""Block Kit limits and checks (adapters.slack.blockkit, the sandbox's blockcheck) and ids."""
