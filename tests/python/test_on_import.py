"""ampkit._on_import.when_imported: a callback run once a module is imported, not before."""

from __future__ import annotations

import sys

import pytest
from ampkit._on_import import when_imported


@pytest.fixture
def module_dir(tmp_path, monkeypatch):
    """A folder on sys.path holding a package `late_pkg` with a module `late_pkg.late`."""
    (tmp_path / "late_pkg").mkdir()
    (tmp_path / "late_pkg" / "__init__.py").write_text("")
    (tmp_path / "late_pkg" / "late.py").write_text("VALUE = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in ("late_pkg.late", "late_pkg"):
        sys.modules.pop(name, None)


def test_the_callback_waits_for_the_import_then_sees_the_module_and_runs_once(module_dir):
    seen = []
    finders = list(sys.meta_path)
    when_imported("late_pkg.late", lambda: seen.append(sys.modules["late_pkg.late"].VALUE))
    assert seen == []
    import late_pkg  # the package alone is not the module
    assert seen == []
    from late_pkg import late
    assert seen == [42] and late.VALUE == 42
    # the finder has left, and the module's loader still answers what a loader is asked
    assert sys.meta_path == finders
    assert "VALUE = 42" in late.__loader__.get_source("late_pkg.late")
    del sys.modules["late_pkg.late"]
    import late_pkg.late  # noqa: F401, F811  (imported again: the callback is not run again)
    assert seen == [42]
    assert late_pkg is sys.modules["late_pkg"]


def test_a_module_already_imported_gets_the_callback_at_once(module_dir):
    import late_pkg.late  # noqa: F401
    finders = list(sys.meta_path)
    seen = []
    when_imported("late_pkg.late", lambda: seen.append(True))
    assert seen == [True] and sys.meta_path == finders


def test_a_module_that_is_not_there_fails_to_import_as_without_the_finder(module_dir):
    seen = []
    finders = list(sys.meta_path)
    when_imported("late_pkg.missing", lambda: seen.append(True))
    with pytest.raises(ModuleNotFoundError, match="late_pkg.missing"):
        import late_pkg.missing  # noqa: F401
    assert seen == [] and sys.meta_path == finders
