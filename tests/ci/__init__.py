"""The checks .ci/run makes besides the tests (the size rule)."""
