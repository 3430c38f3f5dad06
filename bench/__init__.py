"""Benchmarks that print figures: run them with `make bench`."""
