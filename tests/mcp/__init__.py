"""The MCP server and its client of the HTTP API (bot.mcp)."""
