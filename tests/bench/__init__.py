"""The benchmarks' own checks (bench/)."""
