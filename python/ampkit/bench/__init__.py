"""The shared benchmark suite (`python -m ampkit bench`); suites live in bench/suites/*.json."""
