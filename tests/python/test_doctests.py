"""Every ``>>>`` example in ampkit's docstrings runs (with ``ampkit`` and ``torch`` imported), as
the installed package has it; a failing example fails here, printed by doctest."""

import doctest
import importlib
import pkgutil

import ampkit
import pytest
import torch

# Modules whose examples need more than the package (R embedded; a training framework).
SKIP = {"ampkit.r_eval", "ampkit.__main__"}


def _modules():
    names = [info.name for info in pkgutil.walk_packages(ampkit.__path__, "ampkit.")]
    return sorted(name for name in ["ampkit", *names] if name not in SKIP)


def test_the_package_has_examples():
    finder = doctest.DocTestFinder()
    examples = sum(len(test.examples) for name in _modules()
                   for test in finder.find(importlib.import_module(name)))
    assert examples > 50


@pytest.mark.parametrize("name", _modules())
def test_examples_run(name):
    module = importlib.import_module(name)
    finder, runner = doctest.DocTestFinder(), doctest.DocTestRunner(
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    # The examples may use ampkit and torch without importing them (as the README imports them).
    for test in finder.find(module, extraglobs={"ampkit": ampkit, "torch": torch}):
        runner.run(test)
    results = runner.summarize(verbose=False)
    assert results.failed == 0, f"{results.failed} of {results.attempted} examples failed"
