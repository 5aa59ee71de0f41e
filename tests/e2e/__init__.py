"""End-to-end scenarios: real bot processes, restarts, several processes, attacks."""
