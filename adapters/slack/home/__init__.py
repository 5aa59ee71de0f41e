"""App Home: each person's "Waiting for you" list, rendered and published (``tab``). Imports
``asks`` and everything below it."""
