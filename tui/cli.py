"""The ``upwatch`` command line: a thin layer that parses arguments and calls the right piece.

``upwatch --demo [--speed N]`` opens the dashboard on four simulated hosts that replay recorded
real starts (no GPU, no SSH, no configuration needed).

Subcommands:

* ``upwatch replay PATH [--engine NAME] [--unit UNIT] [--json]``: read a saved log (``-`` for
  standard input) and print its startup timeline and final state. Exit 0 when the log was read,
  2 when it could not be (one line on stderr says why).
"""

from __future__ import annotations

import argparse
import json
import sys

from probes.engines import ENGINES
from probes.logfile import LogReadError, read_path
from tui.replay import format_timeline

EXIT_OK = 0
EXIT_UNREADABLE = 2


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for ``upwatch`` (exposed for the tests and ``--help``)."""
    parser = argparse.ArgumentParser(
        prog="upwatch",
        description="Is the LLM server up yet? Reads server startup logs and says how far the start "
                    "has come, and if it broke, why.",
    )
    parser.add_argument("--version", action="version", version="upwatch 0.1.0")
    parser.add_argument("--demo", action="store_true",
                        help="open the dashboard on four simulated hosts replaying recorded real starts")
    parser.add_argument("--speed", type=_speed, default=10.0, metavar="N",
                        help="demo only: time runs N times faster than real (default 10)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    replay = sub.add_parser(
        "replay", help="read a saved log and print its startup timeline",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Read a saved server log (plain text as the server printed it, `journalctl -o json`\n"
                    "output, or a binary .journal file) and print the last start's phases, progress\n"
                    "and outcome.\n\n"
                    "Exit status: 0 the log was read (whatever it says), 2 it could not be read (or the\n"
                    "command line was wrong), 130 interrupted.",
    )
    replay.add_argument("path", metavar="PATH", help="the log file, or - for standard input")
    replay.add_argument("--engine", choices=sorted(ENGINES), type=str.lower,
                        help="the server engine (default: detected from the log)")
    replay.add_argument("--unit", help="journal input only: read only entries about this unit")
    replay.add_argument("--json", action="store_true",
                        help="print one JSON object (engine, state, phase, phases_seen, phases, "
                             "progress, error, cause, hint, starts, restart_loop)")
    return parser


EXIT_INTERRUPTED = 130


def main(argv: list[str] | None = None) -> int:
    """Run ``upwatch`` with ``argv`` (default: ``sys.argv[1:]``) and return the exit status."""
    # Host text may hold any character; a terminal or pipe that cannot show one gets a "?".
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "replay":
            return _replay(args)
        if args.demo:
            return _demo(args)
    except KeyboardInterrupt:
        print("upwatch: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    parser.print_help()
    print("\nNo hosts are configured yet: try `upwatch --demo`.", file=sys.stderr)
    return EXIT_OK


def _speed(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.1 <= value <= 1000:
        raise argparse.ArgumentTypeError("speed must be between 0.1 and 1000")
    return value


def _demo(args: argparse.Namespace) -> int:
    from tui.demo_app import make_demo_app

    make_demo_app(speed=args.speed).run()
    return EXIT_OK


def _replay(args: argparse.Namespace) -> int:
    info: dict = {}
    try:
        reading = read_path(args.path, engine=args.engine, unit=args.unit, info=info)
    except LogReadError as exc:
        print(f"upwatch replay: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    if args.unit and info.get("form") == "text":
        print("upwatch replay: --unit applies to journal input only; read the whole text log",
              file=sys.stderr)
    units = info.get("units") or []
    if not args.unit and len(units) > 1:
        print(f"upwatch replay: this journal holds entries of {len(units)} units, read as one; pick one "
              f"with --unit ({', '.join(units[:6])}{', ...' if len(units) > 6 else ''})", file=sys.stderr)
    try:
        if args.json:
            json.dump(reading.to_json(), sys.stdout, ensure_ascii=False, indent=2)
            sys.stdout.write("\n")
        else:
            sys.stdout.write(format_timeline(reading, args.path))
        sys.stdout.flush()
    except BrokenPipeError:
        # `upwatch replay x | head`: the reader went away; that is not an error of ours.
        sys.stdout = None  # type: ignore[assignment]
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
