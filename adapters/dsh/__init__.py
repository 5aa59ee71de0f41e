"""The dsh web host as a question source: the bot as a connected client of a running host;
``protocol``, ``mux``, ``approvals`` and ``events`` are the pure wire."""
