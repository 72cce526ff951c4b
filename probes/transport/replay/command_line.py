"""What the emulated commands share in reading a command line: ``sudo`` in front
(:func:`strip_sudo`), systemd's unit-name mangling (:func:`unit_name`), and the refusal of bad
arguments (:class:`UsageError`, whose text is the command's stderr line)."""

from __future__ import annotations


class UsageError(Exception):
    """The emulated command refuses its arguments.

    Attributes:
        code: the exit status the command gives (1 for journalctl and systemctl, 2 for nvidia-smi).
    ``str()`` is its stderr line, without the newline.
    """

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def strip_sudo(argv: tuple[str, ...]) -> tuple[str, ...]:
    """``argv`` without a leading ``sudo`` (any path) and its options (``sudo -n journalctl …`` is
    ``journalctl …``); anything else unchanged."""
    if argv and argv[0].rsplit("/", 1)[-1] == "sudo":
        argv = argv[1:]
        while argv and argv[0].startswith("-"):
            argv = argv[1:]
    return argv


def unit_name(name: str) -> str:
    """``journalctl -u``/``systemctl`` name mangling: a name without a type is a service
    (``sglang`` is ``sglang.service``; a name with a dot or a glob stays as it is)."""
    return name if "." in name or "*" in name else name + ".service"
