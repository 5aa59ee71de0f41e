"""Every Web API call paced within Slack's published rate limits: scheduler, lanes, budgets
and the paced client. Imports nothing else of the project."""
