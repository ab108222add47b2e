"""A pytest plugin: ampkit's classes in place of torch's, for PyTorch's own AMP tests.

Loaded by ``run.py`` beside it (``-p ampkit_in_place_of_torch``) in both of its runs. With
``AMPKIT_IN_PLACE_OF_TORCH=1`` it puts, before any test module is imported,

- ``ampkit.autocast`` at ``torch.autocast``, ``torch.amp.autocast`` and
  ``torch.amp.autocast_mode.autocast``;
- ``ampkit.GradScaler`` at ``torch.amp.GradScaler``, ``torch.amp.grad_scaler.GradScaler`` and
  ``torch.GradScaler`` (where torch has it).

torch's deprecated per-device classes (``torch.cpu.amp.GradScaler``, ``torch.cuda.amp.autocast``)
stay torch's: they are subclasses of torch's classes, made when torch was imported, and PyTorch's
tests check their deprecation warnings.

In both runs it writes one JSON line per test to ``AMPKIT_OUTCOMES`` (a file path): the test's
outcome, and how many ampkit autocast regions and grad scalers the test made (the proof that
ampkit, not torch, ran; 0 in the run with torch's classes).
"""

import json
import os

import ampkit
import pytest

SWAP = os.environ.get("AMPKIT_IN_PLACE_OF_TORCH") == "1"
_counts = {"autocast": 0, "GradScaler": 0}


def _count_ampkit_objects():
    """Wraps ampkit.autocast's and ampkit.GradScaler's construction with a counter (same
    arguments, same objects)."""
    new_region = ampkit.autocast.__new__

    def counted_new(cls, *args, **kwargs):
        _counts["autocast"] += 1
        return new_region(cls, *args, **kwargs)

    ampkit.autocast.__new__ = staticmethod(counted_new)
    init = ampkit.GradScaler.__init__

    def counted_init(self, *args, **kwargs):
        _counts["GradScaler"] += 1
        init(self, *args, **kwargs)

    ampkit.GradScaler.__init__ = counted_init


def _put_ampkit_in_place_of_torch():
    import torch.amp.autocast_mode
    import torch.amp.grad_scaler

    for module in (torch, torch.amp, torch.amp.autocast_mode):
        module.autocast = ampkit.autocast
    for module in (torch, torch.amp, torch.amp.grad_scaler):
        if hasattr(module, "GradScaler"):
            module.GradScaler = ampkit.GradScaler
    assert torch.autocast is ampkit.autocast and torch.amp.GradScaler is ampkit.GradScaler


def pytest_configure(config):
    _count_ampkit_objects()
    if SWAP:
        _put_ampkit_in_place_of_torch()


_phases = {}  # test id -> {"setup"/"call"/"teardown": outcome, "xfail": bool, "message": str}


def pytest_runtest_logreport(report):
    phases = _phases.setdefault(report.nodeid, {})
    phases[report.when] = report.outcome
    if hasattr(report, "wasxfail"):
        phases["xfail"] = True
    if report.longrepr and "message" not in phases and (report.failed or report.skipped):
        text = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        phases["message"] = str(text).strip().splitlines()[-1][:300]


def _outcome(phases):
    """pytest's word for a test from its phases: failed, skipped, xfailed, xpassed, passed."""
    if "failed" in (phases.get("setup"), phases.get("call"), phases.get("teardown")):
        return "xpassed" if phases.get("xfail") else "failed"
    if "skipped" in (phases.get("setup"), phases.get("call")):
        return "xfailed" if phases.get("xfail") else "skipped"
    return "xpassed" if phases.get("xfail") else "passed"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    before = dict(_counts)
    yield
    path = os.environ.get("AMPKIT_OUTCOMES")
    if path:
        phases = _phases.get(item.nodeid, {})
        row = {"test": item.nodeid, "outcome": _outcome(phases),
               "autocast": _counts["autocast"] - before["autocast"],
               "GradScaler": _counts["GradScaler"] - before["GradScaler"],
               "message": phases.get("message", "")}
        with open(path, "a") as f:
            f.write(json.dumps(row) + "\n")
