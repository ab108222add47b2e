"""The shared benchmark suite (`python -m ampkit bench`).

Its suites ship with the package, in ampkit/bench/suites/*.json.
"""
