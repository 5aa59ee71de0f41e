"""slack-user-questions. Layers, top down: ``app`` <- ``api``, ``mcp`` <- ``settings`` <-
``questions`` (the seam) and ``logs``; each imports only below it (import-linter)."""
