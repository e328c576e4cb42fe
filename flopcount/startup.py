"""Ctrl-C while the ``flopcount`` command starts: one line and exit code 130, not a traceback.

Importing flopcount (numpy, the runtime and its ops, click, rich) takes most of a second, and a
Ctrl-C then lands inside some module's import: Python prints a KeyboardInterrupt traceback (or,
inside numpy's C extension, an ImportError). The command's own error handling
(``cli/group.py``) exists only once those imports are done. Until then, and only when this
process is the ``flopcount`` command (``python -m flopcount`` or the console script, never a
program that imports the library), SIGINT prints ``flopcount: error: interrupted`` and ends the
process at once: nothing has been written yet, so there is nothing to clean up. What Python
does before flopcount's first line runs (its own start-up, finding the package: a few tens of
milliseconds) is out of reach.

Once the command's main runs, a Ctrl-C still has one place to get lost: Python raises
KeyboardInterrupt wherever the main thread is, and when that is a Python function a C library
calls back (the JIT compiler's object cache, during the first run's kernel compilation), the
exception is printed as "Exception ignored" and the run goes on. The command re-delivers such
an interrupt a moment later, when the main thread is back in ordinary Python code.

    quiet_interrupt_until_main()     # first thing in flopcount/__init__.py
    ...                              # the slow imports; runpy finds flopcount.__main__
    main_takes_over()                # first thing in the command's main()
"""

from __future__ import annotations

# only modules built into the interpreter: a Ctrl-C may come while these very lines run
import _thread
import os
import signal
import sys

EXIT_INTERRUPTED = 130  # the shell's code for SIGINT
INTERRUPTED = "flopcount: error: interrupted"
REDELIVERY_DELAY_S = 0.05  # long enough for the C library's callback to have returned


def is_the_command() -> bool:
    """Whether this process runs the ``flopcount`` command (not a program importing flopcount)."""
    argv = list(getattr(sys, "orig_argv", ()))  # the interpreter's own arguments (Python >= 3.10)
    if any(a == "-m" and b == "flopcount" for a, b in zip(argv, argv[1:])) or "-mflopcount" in argv:
        return True
    script = os.path.basename(sys.argv[0]) if sys.argv else ""
    return script in ("flopcount", "flopcount.exe", "flopcount-script.py")


def _exit_interrupted(signum, frame) -> None:
    try:
        # a newline first on a terminal, which has echoed "^C" on the current line
        sys.stderr.write(("\n" if sys.stderr.isatty() else "") + INTERRUPTED + "\n")
        sys.stderr.flush()
    finally:
        os._exit(EXIT_INTERRUPTED)


def quiet_interrupt_until_main() -> None:
    """When this process is the flopcount command and Python's default SIGINT handling is in
    place: from now until :func:`main_takes_over`, Ctrl-C prints one line and exits 130. Called
    first thing in ``flopcount/__init__.py``; a program importing flopcount is left alone."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler and is_the_command():
        try:
            signal.signal(signal.SIGINT, _exit_interrupted)
        except ValueError:  # not the main thread: signals are not ours to handle
            pass


def main_takes_over() -> None:
    """The command's own handling of Ctrl-C (``cli/group.py``) is in place: back to Python's
    KeyboardInterrupt, which it turns into one line and cleans up after, and an interrupt lost
    in a C library's callback is delivered again."""
    if signal.getsignal(signal.SIGINT) is _exit_interrupted:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        redeliver_interrupts_lost_in_callbacks()


_interrupt_lost = False  # a KeyboardInterrupt was reported as unraisable


def interrupt_was_lost() -> bool:
    """Whether a Ctrl-C was raised inside a callback from C. The library that called back did
    not finish what it was doing (a kernel compiled but never stored), so an error that follows
    is that interrupt's doing and the command reports it as interrupted."""
    return _interrupt_lost


def redeliver_interrupts_lost_in_callbacks() -> None:
    """From now on, a KeyboardInterrupt that Python could only report as unraisable (raised in a
    callback from C code, which has no way to pass it on) interrupts the main thread again
    :data:`REDELIVERY_DELAY_S` later; every other unraisable exception goes to the hook that
    was in place."""
    previous_hook = sys.unraisablehook

    def hook(unraisable) -> None:
        global _interrupt_lost
        if unraisable.exc_type is not None and issubclass(unraisable.exc_type, KeyboardInterrupt):
            _interrupt_lost = True
            # not from here: this hook itself runs inside the callback, where a new
            # KeyboardInterrupt would be lost the same way
            import threading

            timer = threading.Timer(REDELIVERY_DELAY_S, _thread.interrupt_main)
            timer.daemon = True  # a process already ending does not wait for it
            timer.start()
            return
        previous_hook(unraisable)

    sys.unraisablehook = hook


__all__ = ["quiet_interrupt_until_main", "main_takes_over", "redeliver_interrupts_lost_in_callbacks",
           "interrupt_was_lost", "is_the_command", "EXIT_INTERRUPTED", "INTERRUPTED"]
