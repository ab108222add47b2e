"""Code run when a module is first imported, not before: ``when_imported(name, callback)``.

ampkit tells Dynamo how to trace its regions (``torch.compiler.substitute_in_graph``), which
imports ``torch._dynamo``: as long again as ``import torch`` itself, for every program that
imports ampkit, compiling or not. Dynamo traces nothing before it is imported, so the telling
waits for that import (``torch.compile`` makes it).
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
import threading
from typing import Callable

__all__ = ["when_imported"]

_lock = threading.Lock()


def when_imported(name: str, callback: Callable[[], None]) -> None:
    """Calls ``callback()`` once module ``name`` is imported: now if it is, else right after its
    import has run (before the importer gets it)."""
    with _lock:
        if name not in sys.modules:
            sys.meta_path.insert(0, _Finder(name, callback))
            return
    callback()


class _Finder(importlib.abc.MetaPathFinder):
    """The first finder asked for ``name``: finds it as the others would, then runs ``callback``
    after the module's code. Leaves ``sys.meta_path`` at its first use."""

    def __init__(self, name: str, callback: Callable[[], None]) -> None:
        self._name, self._callback = name, callback

    def find_spec(self, fullname, path, target=None):
        if fullname != self._name:
            return None
        with _lock:
            if self not in sys.meta_path:
                return None
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = _ThenCall(spec.loader, self._callback)
        return spec


class _ThenCall(importlib.abc.Loader):
    """``loader``, with ``callback()`` after it has run the module's code."""

    def __init__(self, loader, callback: Callable[[], None]) -> None:
        self._loader, self._callback = loader, callback

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        self._loader.exec_module(module)
        self._callback()

    def __getattr__(self, attr):
        # what else the import system or a module asks of its loader (get_resource_reader, ...)
        return getattr(self._loader, attr)
