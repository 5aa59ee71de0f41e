"""The README and docs/ pages whose examples and claims are tests."""
