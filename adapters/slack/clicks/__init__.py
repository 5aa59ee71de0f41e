"""What a click does: the bolt app and listeners (ack first), the handler and its pure
decisions. Imports ``home``, ``asks`` and everything below them."""
