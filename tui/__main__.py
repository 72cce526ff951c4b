"""``python -m tui`` runs the ``upwatch`` command; the ``upwatch`` script calls :func:`run` too.

Ctrl-C is clean from the first instant this module runs: until :func:`tui.cli.main` has taken
over (it turns KeyboardInterrupt into "upwatch: interrupted", exit 130), SIGINT writes that line
and exits 130 at once, so an interrupt during the imports prints no traceback. (Before this module
runs, the interpreter's own start-up, ``site`` and ``.pth`` files included, is not upwatch's: a
SIGINT there is Python's.)
"""

import os
import signal


def _interrupted(_signum: int, _frame: object) -> None:
    os.write(2, b"upwatch: interrupted\n")
    os._exit(130)  # nothing to clean up yet: only imports ran


def run() -> int:
    """Run ``upwatch`` (``sys.argv``) and return its exit status (see :func:`tui.cli.main`)."""
    signal.signal(signal.SIGINT, _interrupted)
    from tui.cli import main

    try:
        # main() catches KeyboardInterrupt from here on (and the commands rely on it: status --watch
        # ends on Ctrl-C, asyncio cancels its tasks, the dashboard restores the terminal)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        return main()
    except KeyboardInterrupt:  # between the two lines above, or after main() returned
        signal.signal(signal.SIGINT, _interrupted)
        os.write(2, b"upwatch: interrupted\n")
        return 130
    finally:
        signal.signal(signal.SIGINT, _interrupted)  # the interpreter's exit: no traceback either


if __name__ == "__main__":
    raise SystemExit(run())
