"""Benchmarks of hdsp, each against its baseline in the same run (`make bench`)."""
