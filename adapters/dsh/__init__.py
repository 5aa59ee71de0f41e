"""The dsh web host as a question source: the bot as a connected client of a running host
(the 0.2 protocol); ``protocol`` and ``mux`` are the pure wire."""
