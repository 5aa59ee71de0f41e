"""slack-user-questions: the seam (``questions``), the bot's settings, HTTP API, MCP and app.

Layers, top to bottom: ``app`` (``python -m bot``) <- ``api`` and ``mcp`` <- ``settings`` <-
``questions`` and ``logs``; each may import only those below it (pyproject's import-linter).
"""
