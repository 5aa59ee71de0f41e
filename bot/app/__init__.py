"""The bot process (the top layer): wiring, Socket Mode, ``/healthz``, ports, scopes, heap."""
