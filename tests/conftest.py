"""Fixtures shared by the unit tests."""
# Fixture notebooks are inputs of the tooling tests, not chapters to run.
collect_ignore_glob = ["fixtures/*"]
