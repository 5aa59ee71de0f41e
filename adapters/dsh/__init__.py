"""The dsh web host as a question source: the bot as a connected client of a running host;
``protocol`` (0.1.1), ``mux`` (0.2) and ``wire`` are the pure wire."""
