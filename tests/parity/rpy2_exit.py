"""How the in-process R runners (R embedded through rpy2) end: os._exit once their records are
written and their streams flushed.

reticulate 1.28 runs a thread of its own that, every 250 ms, schedules R's event polling as a
Python pending call for as long as the polling keeps running (reticulate's event_loop.cpp). At
the end of a script the interpreter finalizes while such a call may still be scheduled, and the
thread's next Py_AddPendingCall meets an interpreter already gone (SIGSEGV in
_PyEval_AddPendingCall with interp=NULL, seen in gdb, in about half the runs of some
scenarios), after every record was written. The runners only need their records; ending
without Python's finalization leaves that thread nothing to race with.
"""
import os
import sys


def finish(main, argv) -> None:
    """Runs main(argv), then ends the process at once: exit status 0, or 1 with the traceback
    printed when main raised."""
    status = 0
    try:
        main(argv)
    except BaseException:  # noqa: BLE001 (any failure is the runner's, reported as exit 1)
        import traceback
        traceback.print_exc()
        status = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
