"""One browser's app under ``upwatch serve``: the dashboard (``python -m tui.serve_app ARGS``, the
arguments of ``upwatch``), on textual's web driver, ended when the server is gone.

The server passes the read end of a pipe whose write end only it holds (``$UPWATCH_SERVE_WATCH_FD``).
The pipe ends when the server process ends, however it ends (SIGKILL included): a thread here then
TERMs this process (textual's web driver turns SIGTERM into the app's quit, which stops the watchers
and their commands) and, should the app not be gone after :data:`GONE_GRACE_S`, exits hard.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

#: The environment variable naming the watch pipe's file descriptor.
WATCH_FD_ENV = "UPWATCH_SERVE_WATCH_FD"
#: Seconds the app has to quit on its own once the server is gone.
GONE_GRACE_S = 3.0


def watch_server(fd: int) -> None:
    """Block until the pipe ``fd`` ends (the server never writes to it), then end this process:
    SIGTERM, and ``os._exit(1)`` after :data:`GONE_GRACE_S` seconds."""
    while os.read(fd, 1):
        pass
    os.kill(os.getpid(), signal.SIGTERM)
    threading.Event().wait(GONE_GRACE_S)
    os._exit(1)


def main(argv: list[str]) -> int:
    """Watch the server's pipe (when one is named) and run ``upwatch argv``; its exit status."""
    fd = os.environ.pop(WATCH_FD_ENV, None)
    if fd is not None:
        threading.Thread(target=watch_server, args=(int(fd),), name="watch server", daemon=True).start()
    from tui.cli import main as upwatch

    return upwatch(argv)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
