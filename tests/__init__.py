"""The test suite: helpers here, tests in folders mirroring the packages."""
