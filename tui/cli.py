"""The ``upwatch`` command line: a thin layer that parses arguments and calls the right piece.

``upwatch --demo [--speed N]`` opens the dashboard on four simulated hosts that replay recorded
real starts (no GPU, no SSH, no configuration needed).

``upwatch [--config PATH] [HOST/UNIT | NAME ...]`` opens the dashboard on live hosts: those of the
configuration file (:mod:`tui.config`), or the quick forms given (``root@10.0.0.5/sglang.service``),
or only the configured hosts NAMEd. With no host at all it prints the help and where it looked.

Subcommands:

* ``upwatch config [--config PATH] [HOST/UNIT | NAME ...]``: print the effective configuration and
  where each value came from. Exit 0, or 2 when the configuration is wrong.
* ``upwatch status [--json] [--timeout DURATION] [--config PATH] [HOST/UNIT | NAME ...]``: one look
  at each host, printed (:func:`tui.status.run_status`). Exit 0 every host answered, 4 one could not be
  reached or its unit or journal cannot be read (why on stderr), 2 bad configuration or arguments.

* ``upwatch history [--json] [HOST ...]``: how long earlier starts took, per host, unit, model and
  engine arguments (:func:`tui.history.run_history`). Exit 0, or 2 when the history cannot be read.

* ``upwatch exporter [--listen 127.0.0.1:9464] [--config PATH] [HOST/UNIT | NAME ...]``: watch the
  hosts headless and serve their state as Prometheus metrics (:func:`tui.exporter.run_exporter`)
  until Ctrl-C or SIGTERM. Exit 0, or 2 bad configuration or an address that cannot be bound.
* ``upwatch serve [--listen HOST:PORT] [--max-viewers N] [--demo [--speed N] | --config PATH |
  HOST ...]``: the dashboard for browsers, read-only, behind a token URL (:mod:`tui.serve`). Exit 0
  after a signal, 2 bad configuration, no host, or the address cannot be bound.

* ``upwatch replay PATH [--engine NAME] [--unit UNIT] [--json]``: read a saved log (``-`` for
  standard input) and print its startup timeline and final state. Exit 0 when the log was read,
  2 when it could not be (one line on stderr says why).
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from collections.abc import Callable, Mapping, Sequence

from probes.logs.engines import ENGINES
from probes.hosttext import json_text, one_line
from probes.sources.logfile import LogReadError, read_path
from probes.fold.notify import url_label
from probes.spec import DEFAULT_PORTS, HostSpec
from tui import __version__
from tui.config import (ENV_VAR, HOST_KEYS, SETTING_KEYS, Config, ConfigError, default_config_path, display_path,
                        load_config, looks_like_quick_form, resolve_ssh)
from tui.duration import parse_duration
from tui.replay import format_timeline, replay_json

EXIT_OK = 0
EXIT_UNREADABLE = 2
#: Bad configuration or command line.
EXIT_USAGE = 2
#: ``upwatch status``: a host could not be reached (returned by :func:`tui.status.run_status`).
EXIT_UNREACHABLE = 4
#: ``upwatch wait``'s status for bad arguments or configuration (sysexits' EX_USAGE): its 2 means
#: "restart loop".
EXIT_WAIT_USAGE = 64

#: Ctrl-C (or SIGINT) at any moment: one line on stderr ("upwatch: interrupted"), no traceback.
EXIT_INTERRUPTED = 130
#: ``--demo``'s time compression when ``--speed`` is not given.
DEMO_SPEED = 10.0

#: The subcommands; the first word of argv that is not an option picks one (see :func:`main`).
COMMANDS = ("replay", "config", "status", "wait", "history", "report", "mcp", "exporter", "serve")

_WHERE = ("The hosts come from hosts.toml in the user's config folder (~/.config/upwatch/hosts.toml\n"
          "on Linux), or the file named by $UPWATCH_CONFIG, or by --config PATH.")
_QUICK = ("Instead of a file, hosts can be given as quick forms, [user@]host[:port]/unit:\n"
          "  root@10.0.0.5/sglang.service   gpu-node-2:2222/vllm (.service is added)   local/sglang\n"
          "A HOST without '/' is the name of a host of the file: only the hosts named are used.")

#: The end of ``upwatch --help``: a hosts.toml to start from (the messages about a missing or empty
#: file point here: a pip-installed upwatch has no README beside it).
_EXAMPLE = ("An example hosts.toml:\n"
            "  [defaults]\n"
            "  sudo = true                 # journalctl/systemctl through `sudo -n` (never prompts)\n"
            "\n"
            "  [[host]]\n"
            "  name = \"gpu-node-1\"\n"
            "  ssh = \"gpu-node-1\"          # an alias of ~/.ssh/config, or user@host[:port]\n"
            "  unit = \"sglang\"             # \".service\" is added\n"
            "  engine = \"sglang\"           # optional: detected from the log\n"
            "  port = 30000                # optional: the engine's default\n"
            + textwrap.fill(f"A [[host]] takes the keys {', '.join(HOST_KEYS)} (unit is required); [defaults] "
                            f"any of them but name; [settings] {', '.join(SETTING_KEYS)}. `upwatch config` "
                            "prints every value upwatch would use and where it came from.", 78))

_DESCRIPTION = ("Is the LLM server up yet? Watches SGLang/vLLM servers starting as systemd units on GPU "
                "hosts over SSH, reads their startup logs and says how far the start has come, and if "
                "it broke, why.")


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--version", action="version", version=f"upwatch {__version__}")
    parser.add_argument("--demo", action="store_true",
                        help="open the dashboard on four simulated hosts replaying recorded real starts")
    parser.add_argument("--speed", type=_speed, default=None, metavar="N",
                        help=f"with --demo only: time runs N times faster than real (default {DEMO_SPEED:g})")
    parser.add_argument("--config", metavar="PATH", default=None,
                        help=f"the hosts file (default: ${ENV_VAR}, else {display_path(default_config_path())})")


def _add_hosts(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("hosts", nargs="*", metavar="HOST", help=what)


def _add_config_option(parser: argparse.ArgumentParser) -> None:
    # SUPPRESS: `upwatch --config X status` keeps X (a subparser default would overwrite it).
    parser.add_argument("--config", metavar="PATH", default=argparse.SUPPRESS,
                        help=f"the hosts file (default: ${ENV_VAR}, else {display_path(default_config_path())})")


def build_dashboard_parser() -> argparse.ArgumentParser:
    """The parser for ``upwatch`` without a subcommand: options and free ``HOST`` arguments.

    (argparse cannot mix subcommands with free positional arguments, so :func:`main` picks this
    parser or :func:`build_parser` by the first word that is not an option.)
    """
    parser = argparse.ArgumentParser(
        prog="upwatch", usage="%(prog)s [-h] [--version] [--demo [--speed N]] [--config PATH] [--read-only] [HOST ...]\n"
                              "       %(prog)s {replay,config,status,wait,history,report,mcp,exporter,serve} ...",
        description=textwrap.fill(_DESCRIPTION, 78), formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"{_WHERE}\n{_QUICK}\n\n"
               "commands:\n"
               "  replay PATH        read a saved log and print its startup timeline\n"
               "  config             print the effective configuration and where each value came from\n"
               "  status             look at each host once and print its state (--watch: a JSON line per change)\n"
               "  wait HOST          block until the unit's new process is ready; exit 0/1/2/3/4 (for scripts)\n"
               "  history [HOST]     how long earlier starts took (medians per phase)\n"
               "  report HOST        look at one host once and print a Markdown report to paste\n"
               "  mcp                serve upwatch's answers to a coding agent (MCP over stdio)\n"
               "  exporter [HOST]    watch headless and serve Prometheus metrics (127.0.0.1:9464)\n"
               "  serve [HOST ...]   serve the dashboard to browsers: read-only, behind a token URL\n"
               "  (upwatch COMMAND --help for more)\n"
               "Durations (--timeout): 15s, 5m, 1h, 1h30m or plain seconds. Ctrl-C ends any command with\n"
               "exit status 130 and one line on stderr (status --watch and the dashboard, once running: 0).\n\n"
               f"{_EXAMPLE}",
    )
    _add_common(parser)
    parser.add_argument("--read-only", action="store_true",
                        help="no actions: the restart/stop/start/kill keys only say they are off "
                             "(also [settings] read_only = true)")
    _add_hosts(parser, "a quick form [user@]host[:port]/unit, or the name of a configured host")
    return parser


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for ``upwatch COMMAND ...`` (exposed for the tests and ``--help``)."""
    parser = argparse.ArgumentParser(prog="upwatch", description=_DESCRIPTION)
    _add_common(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    replay = sub.add_parser(
        "replay", help="read a saved log and print its startup timeline",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Read a saved server log (plain text as the server printed it, `journalctl -o json`\n"
                    "output, or a binary .journal file) and print the last start's phases, progress\n"
                    "and outcome.\n\n"
                    "What is not a log is refused in one line: binary data, NUL bytes only (/dev/zero),\n"
                    "a block device; at most 64 MiB are read from a character device. A log with no\n"
                    "server start in it (an empty file) is NO SERVER START FOUND, in --json \"state\": \"none\"\n"
                    "and \"phase\": null. With - on a terminal, type or paste the log and end it with Ctrl-D.\n\n"
                    "Exit status: 0 the log was read (whatever it says), 2 it could not be read (or the\n"
                    "command line was wrong), 130 interrupted.",
    )
    replay.add_argument("path", metavar="PATH", help="the log file, or - for standard input")
    replay.add_argument("--engine", choices=sorted(ENGINES), type=str.lower,
                        help="the server engine (default: detected from the log)")
    replay.add_argument("--unit", help="journal input only: read only entries about this unit")
    replay.add_argument("--json", action="store_true",
                        help="print one JSON object (engine, state, phase, phases_seen, phases, "
                             "progress, error, cause, hint, starts, restart_loop, suspects, service); state is "
                             "ready, failed, loading, stopped, or none (no server start in the log)")
    replay.add_argument("--markdown", action="store_true",
                        help="print the Markdown report to paste (as `upwatch report` and the dashboard's c key): "
                             "the last start's phases, its decisive line with the lines before it, what a saved "
                             "log cannot tell (unit, GPUs, health)")
    config = sub.add_parser(
        "config", help="print the effective configuration and where each value came from",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Print the configuration upwatch would run with: which file (and why that one), every\n"
                    "host with each key, its value and where it came from (file:line, [defaults],\n"
                    "a quick form, or the built-in default), and the settings.\n\n"
                    f"{_WHERE}\n{_QUICK}\n\n"
                    "Exit status: 0 the configuration is usable, 2 it is not (one line on stderr says\n"
                    "which file, line and key).",
    )
    _add_config_option(config)
    _add_hosts(config, "a quick form [user@]host[:port]/unit, or the name of a configured host")
    status = sub.add_parser(
        "status", help="look at each host once and print its state",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Look at each host once (unit, log, GPUs, health) and print one summary per host.\n\n"
                    f"{_WHERE}\n{_QUICK}\n\n"
                    "Exit status: 0 every host answered and its unit and journal were read, 4 at least one\n"
                    "host could not be reached or gave no answer, or its unit or journal cannot be read\n"
                    "(sudo missing or refusing, no systemd, no journal access; one line on stderr per host\n"
                    "says why), 2 bad configuration or arguments (e.g. a HOST name that is not configured).\n\n"
                    "--watch prints, per host, a first JSON line once it answered (or after --timeout),\n"
                    "then one line whenever its state, phase, progress step, readiness rung, verdict or\n"
                    "connection changes; each line is the --json object plus \"time\" and \"changed\".\n"
                    "It runs until Ctrl-C or SIGTERM and exits 0.",
    )
    status.add_argument("--json", action="store_true", help="print JSON instead of text")
    status.add_argument("--watch", action="store_true",
                        help="keep watching; print one JSON line per change (phase, progress step, readiness "
                             "rung, verdict, connection) until Ctrl-C")
    status.add_argument("--timeout", type=_duration_option(allow_zero=False, most_s=3600), default=15.0,
                        metavar="DURATION",
                        help="give up on a host after this long: 15s, 2m, or seconds; more than 0, at most 1h "
                             "(default 15s)")
    _add_config_option(status)
    _add_hosts(status, "a configured host's name (default: all), or a quick form [user@]host[:port]/unit")
    waiter = sub.add_parser(
        "wait", help="block until a host's unit is ready (for scripts)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Block until the unit's current start is ready: its engine's ready line, and /health OK\n"
                    "answered by that process; with --until serving also a one-token generation. A start that is\n"
                    "already ready answers at once (exit 0), one that already failed too (exit 1); with --restart\n"
                    "only a start that began after the restart counts.\n\n"
                    f"{_WHERE}\n{_QUICK}\n\n"
                    "Exit status: 0 ready, 1 the start failed (the decisive line and hint are printed),\n"
                    "2 restart loop, 3 timeout, 4 unreachable, not allowed or cannot see (SSH; sudo missing\n"
                    "or refusing; no systemd; no journal access; read_only = true with --restart), 64 bad\n"
                    "arguments or configuration. Every exit but 0 says why on stderr.\n\n"
                    "On a terminal one line is redrawn in place (phase, progress bar, time, ETA from\n"
                    "earlier starts); otherwise one line is printed per change of state, phase, progress\n"
                    "step or readiness rung, then the outcome.",
    )
    waiter.add_argument("--restart", action="store_true", help="restart the unit first (systemctl restart)")
    waiter.add_argument("--until", choices=("ready", "serving"), default="ready",
                        help="ready (health OK, default) or serving (a generation answered)")
    waiter.add_argument("--timeout", type=_duration_option(allow_zero=True), default=1800.0, metavar="DURATION",
                        help="give up after this long: 90s, 30m, 1h, or seconds; 0 looks once (once the "
                             "host answered) and exits (default 30m)")
    _add_config_option(waiter)
    _add_hosts(waiter, "one host: a configured host's name, or a quick form [user@]host[:port]/unit")
    report = sub.add_parser(
        "report", help="look at one host once and print a Markdown report to paste",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Look at one host once (as `upwatch status`) and print a Markdown report of it, to paste\n"
                    "into a chat or an issue: host, unit, engine, state and phase timeline, the verdict\n"
                    "with its evidence, the decisive line with the 10 log lines before it, the unit's state\n"
                    "(NRestarts, last exit), GPUs, readiness, what upwatch could not read, its version.\n"
                    "The dashboard's c key copies the same report to the clipboard.\n\n"
                    f"{_WHERE}\n{_QUICK}\n\n"
                    "Exit status: 0 the host answered and its unit and journal were read, 4 it could not be\n"
                    "reached or gave no answer, or its unit or journal cannot be read (the report says what\n"
                    "could not be read; one line on stderr says why), 2 bad configuration or arguments.",
    )
    report.add_argument("--timeout", type=_duration_option(allow_zero=False, most_s=3600), default=15.0,
                        metavar="DURATION",
                        help="give up on the host after this long: 15s, 2m, or seconds (default 15s)")
    _add_config_option(report)
    _add_hosts(report, "one host: a configured host's name, or a quick form [user@]host[:port]/unit")
    mcp = sub.add_parser(
        "mcp", help="serve upwatch's answers to a coding agent (Model Context Protocol, stdio)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="A Model Context Protocol server on standard input/output, for a coding agent: instead of\n"
                    "polling `sleep 120 && curl /health`, the agent calls wait_ready and gets upwatch wait's\n"
                    "outcome. Tools: list_hosts, host_status, wait_ready, log, report; with --allow-actions\n"
                    "also restart and stop (each written to the audit log with actor mcp). See\n"
                    "docs/pair-debugging.md for the tools' JSON shapes and how to register the server.\n\n"
                    f"{_WHERE}\n{_QUICK}\n\n"
                    "Exit status: 0 when the client closes the connection, 2 bad configuration or arguments.",
    )
    mcp.add_argument("--allow-actions", action="store_true",
                     help="also offer the restart and stop tools (never kill); off: those tools do not exist")
    _add_config_option(mcp)
    _add_hosts(mcp, "a configured host's name (default: all), or a quick form [user@]host[:port]/unit")
    history = sub.add_parser(
        "history", help="how long earlier starts took (medians per phase)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Print the start history: for each host, unit, model and engine-argument hash, how\n"
                    "many starts were ready and failed, the median of each phase and of the whole start\n"
                    "over the last 20 ready ones, and when the newest began. The dashboard, `upwatch\n"
                    "status` and `upwatch wait` write every start that ends ready or failed to\n"
                    "history.sqlite3 in the user\n"
                    "data folder (~/.local/share/upwatch; $UPWATCH_DATA_DIR overrides the folder).\n\n"
                    "Exit status: 0 (also when nothing is recorded yet), 2 the history file cannot be read.",
    )
    history.add_argument("--json", action="store_true",
                         help="print a JSON list (host, unit, model, args_hash, engine, ready, failed, "
                              "typical_starts, median_total_s, median_phases_s, last_start, last_outcome)")
    history.add_argument("hosts", nargs="*", metavar="HOST", help="a host's name as configured (default: all)")
    exporter = sub.add_parser(
        "exporter", help="watch the hosts headless and serve Prometheus metrics",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Watch each host (unit, log, GPUs, health) as the dashboard does, without a screen, and\n"
                    "serve their state at http://LISTEN/metrics for Prometheus (text format; OpenMetrics when\n"
                    "the scraper asks for it). Run it on each GPU host for its own units (ssh = \"local\"),\n"
                    "or centrally over SSH for a few dozen hosts (docs/fleets.md).\n\n"
                    f"{_WHERE}\n{_QUICK}\n\n"
                    "Runs until Ctrl-C or SIGTERM. Exit status: 0, or 2 bad configuration or arguments, or\n"
                    "an address that cannot be bound (one line on stderr says why).",
    )
    exporter.add_argument("--listen", default="127.0.0.1:9464", metavar="HOST:PORT",
                          help="where to serve /metrics (default 127.0.0.1:9464: this machine only)")
    _add_config_option(exporter)
    _add_hosts(exporter, "a configured host's name (default: all), or a quick form [user@]host[:port]/unit")
    serve = sub.add_parser(
        "serve", help="serve the dashboard to browsers (read-only, behind a token URL)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Serve the dashboard to web browsers (textual-serve): each browser gets its own\n"
                    "read-only dashboard (no restart, stop or kill). The first line printed is the URL\n"
                    "to open; its token is needed by every request. It listens on 127.0.0.1 (share it\n"
                    "through an SSH tunnel: docs/sharing.md); another --listen address is warned about.\n"
                    "It runs until Ctrl-C or SIGTERM, and then ends every process it started.\n\n"
                    f"{_WHERE}\n{_QUICK}\n\n"
                    "Exit status: 0 after a signal, 2 bad configuration or arguments, no host, or the\n"
                    "address cannot be bound.",
    )
    serve.add_argument("--listen", default="127.0.0.1:8765", type=_listen, metavar="HOST:PORT",
                       help="the address to listen on (default 127.0.0.1:8765; port 0: any free port)")
    serve.add_argument("--max-viewers", type=_viewers, default=4, metavar="N",
                       help="at most N browsers at once (default 4; each runs its own dashboard)")
    # SUPPRESS: `upwatch --demo serve` keeps the flag given before the command.
    serve.add_argument("--demo", action="store_true", default=argparse.SUPPRESS,
                       help="serve the demo (four simulated hosts) instead of configured hosts")
    serve.add_argument("--speed", type=_speed, default=argparse.SUPPRESS, metavar="N",
                       help=f"with --demo only: time runs N times faster than real (default {DEMO_SPEED:g})")
    _add_config_option(serve)
    _add_hosts(serve, "a configured host's name (default: all), or a quick form [user@]host[:port]/unit")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run ``upwatch`` with ``argv`` (default: ``sys.argv[1:]``) and return the exit status.

    Ctrl-C at any point is :data:`EXIT_INTERRUPTED` with one line on stderr (``python -m tui`` and
    the ``upwatch`` script also cover the imports before this runs: :func:`tui.__main__.run`).
    """
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print("upwatch: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _main(argv: list[str] | None) -> int:
    # Host text may hold any character; a terminal or pipe that cannot show one gets a "?".
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")
    argv = list(sys.argv[1:] if argv is None else argv)
    idx = _command_index(argv)
    parser = build_parser() if idx is not None else build_dashboard_parser()
    waiting = idx is not None and argv[idx] == "wait"
    try:
        args = parser.parse_args(argv)
        _check_mode_flags(parser, args)
    except SystemExit as exc:
        if waiting and exc.code == EXIT_USAGE:
            raise SystemExit(EXIT_WAIT_USAGE) from None  # 2 is wait's "restart loop"
        raise
    command = getattr(args, "command", None)
    try:
        if command == "replay":
            return _replay(args)
        if command is None and args.demo:
            return _demo(args)
        if command == "config":
            return _config(args)
        if command == "status":
            return _status(args)
        if command == "wait":
            return _wait(args)
        if command == "report":
            return _report(args)
        if command == "mcp":
            return _mcp(args)
        if command == "exporter":
            return _exporter(args)
        if command == "serve":
            from tui.serve import run_serve

            return run_serve(listen=args.listen, max_viewers=args.max_viewers, demo=args.demo,
                             speed=args.speed, config_path=getattr(args, "config", None), hosts=args.hosts,
                             out=sys.stdout, err=sys.stderr)
        if command == "history":
            from tui.history import run_history

            return run_history(args.hosts, as_json=args.json, out=sys.stdout, err=sys.stderr)
        return _dashboard(parser, args)
    except ConfigError as exc:
        print(f"upwatch: {exc}", file=sys.stderr)
        return EXIT_WAIT_USAGE if waiting else EXIT_USAGE


def _check_mode_flags(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse (``parser.error``: usage, one line, exit 2) a flag given where it does nothing: the
    demo's flags elsewhere, and what the demo does not read."""
    command = getattr(args, "command", None)
    if args.demo and command not in (None, "serve"):
        parser.error(f"--demo opens the dashboard on simulated hosts: it takes no command ({command})")
    if args.speed is not None and not args.demo:
        parser.error("--speed sets the demo's speed: it applies with --demo only")
    if args.demo and args.hosts:
        parser.error("--demo runs its own simulated hosts: give no HOST with it")
    if args.demo and args.config is not None:
        parser.error("--demo runs its own simulated hosts: it reads no --config")
    if command in ("replay", "history") and getattr(args, "config", None) is not None:
        what = "a saved log" if command == "replay" else "the start history"
        parser.error(f"{command} reads {what}, not the hosts file: --config does not apply")


def _command_index(argv: Sequence[str]) -> int | None:
    """The index of the subcommand in ``argv``: the first word that is neither an option nor an
    option's value, when it is one of :data:`COMMANDS`; else None."""
    takes_value = {"--config", "--speed"}
    skip = False
    for i, word in enumerate(argv):
        if skip:
            skip = False
        elif word == "--":
            return None
        elif word in takes_value:
            skip = True
        elif not word.startswith("-") or word == "-":
            return i if word in COMMANDS else None
    return None


def _duration_option(*, allow_zero: bool, most_s: float | None = None) -> Callable[[str], float]:
    """The argparse ``type`` of a duration option: :func:`tui.duration.parse_duration`, with 0
    allowed or not, and an upper bound of its own (seconds)."""
    def parse(text: str) -> float:
        try:
            value = parse_duration(text, allow_zero=allow_zero)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        if most_s is not None and value > most_s:
            raise argparse.ArgumentTypeError(f"at most {most_s:g} s: {text!r}")
        return value

    return parse


def select_hosts(hosts: Sequence[str], config_path: str | None,
                 env: Mapping[str, str] | None = None) -> Config:
    """Load the configuration for the HOST arguments of a command.

    A HOST with a ``/`` is a quick form (the quick forms replace the file's hosts, see
    :func:`tui.config.load_config`); one without is the name of a host to keep. Quick form hosts
    are always kept.

    Raises:
        ConfigError: the configuration is wrong, or a name is not a host's (the message lists the
            known names).
    """
    quick = [h for h in hosts if looks_like_quick_form(h)]
    names = [h for h in hosts if not looks_like_quick_form(h)]
    config = load_config(config_path, quick, os.environ if env is None else env)
    if not names:
        return config
    known = [h.name for h in config.hosts]
    missing = [n for n in dict.fromkeys(names) if n not in known]
    if missing:
        where = (f"in {config.file.shown}" if config.file and config.file.exists and not quick
                 else "given" if quick else f"({config.file.shown if config.file else 'no file'} was not found)")
        listed = ", ".join(known) if known else "none"
        raise ConfigError(f"no host named {', '.join(repr(m) for m in missing)}; the hosts {where} are: {listed}")
    from dataclasses import replace

    quick_names = {h.name for h in config.hosts if config.sources.get(h.name, {}).get("unit", "").startswith("quick")}
    keep = tuple(h for h in config.hosts if h.name in names or h.name in quick_names)
    return replace(config, hosts=keep, sources={h.name: config.sources[h.name] for h in keep})


def _no_hosts(parser: argparse.ArgumentParser, config: Config) -> int:
    parser.print_help()
    f = config.file
    looked = f"{f.shown} ({'no [[host]] tables in it' if f.exists else 'not found'})" if f else "no file"
    print(f"\nNo hosts are configured: looked for {looked}.\n"
          "Write that file (`upwatch --help` ends with an example), give HOST/UNIT quick forms, "
          "or try `upwatch --demo`.",
          file=sys.stderr)
    return EXIT_OK


def _dashboard(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    config = select_hosts(args.hosts, args.config)
    if not config.hosts:
        return _no_hosts(parser, config)
    if args.read_only:
        from dataclasses import replace

        config = replace(config, read_only=True)
    from tui.live import make_live_app

    make_live_app(config).run()
    return EXIT_OK


def _nothing_to_do(command: str, what: str, config: Config) -> int:
    """A headless command with no host: one line on stderr saying where it looked; :data:`EXIT_USAGE`."""
    f = config.file
    looked = f"{f.shown} ({'no [[host]] tables in it' if f.exists else 'not found'})" if f else "no file"
    print(f"upwatch {command}: {what}: looked for {looked}; write hosts.toml (`upwatch --help` "
          "ends with an example) or give HOST/UNIT quick forms", file=sys.stderr)
    return EXIT_USAGE


def _status(args: argparse.Namespace) -> int:
    config = select_hosts(args.hosts, getattr(args, "config", None))
    if not config.hosts:
        return _nothing_to_do("status", "no hosts to look at", config)
    if args.watch:
        from tui.status import run_status_watch

        return run_status_watch(config, timeout_s=args.timeout, out=sys.stdout)
    from tui.status import run_status

    return run_status(config, as_json=args.json, timeout_s=args.timeout, out=sys.stdout)


def _exporter(args: argparse.Namespace) -> int:
    config = select_hosts(args.hosts, getattr(args, "config", None))
    if not config.hosts:
        return _nothing_to_do("exporter", "no hosts to watch", config)
    from tui.exporter import run_exporter

    return run_exporter(config, args.listen)


def _wait(args: argparse.Namespace) -> int:
    if len(args.hosts) != 1:
        print("upwatch wait: name exactly one HOST (a configured name or HOST/UNIT)", file=sys.stderr)
        return EXIT_WAIT_USAGE
    config = select_hosts(args.hosts, getattr(args, "config", None))
    if len(config.hosts) != 1:
        print("upwatch wait: name exactly one HOST (a configured name or HOST/UNIT)", file=sys.stderr)
        return EXIT_WAIT_USAGE
    from tui.wait import run_wait

    return run_wait(config.hosts[0], restart=args.restart, until=args.until, timeout_s=args.timeout,
                    out=sys.stdout, tty=sys.stdout.isatty(), config=config)


def _report(args: argparse.Namespace) -> int:
    one = "upwatch report: name exactly one HOST (a configured name or HOST/UNIT)"
    if len(args.hosts) != 1:
        print(one, file=sys.stderr)
        return EXIT_USAGE
    config = select_hosts(args.hosts, getattr(args, "config", None))
    if len(config.hosts) != 1:
        print(one, file=sys.stderr)
        return EXIT_USAGE
    from tui.host_report import run_report

    return run_report(config, timeout_s=args.timeout, out=sys.stdout)


def _mcp(args: argparse.Namespace) -> int:
    config = select_hosts(args.hosts, getattr(args, "config", None))
    if not config.hosts:
        print("upwatch mcp: no hosts to serve: write hosts.toml (`upwatch --help` ends with an example) or "
              "give HOST/UNIT quick forms", file=sys.stderr)
        return EXIT_USAGE
    from tui.mcp_server import run_mcp

    return run_mcp(config, allow_actions=args.allow_actions)


def _config(args: argparse.Namespace) -> int:
    config = select_hosts(args.hosts, getattr(args, "config", None))
    sys.stdout.write(format_config(config, quick=any(looks_like_quick_form(h) for h in args.hosts)))
    return EXIT_OK


def format_config(config: Config, *, quick: bool = False) -> str:
    """``upwatch config``'s text: the file and why it was chosen, each host's keys with value and
    source, the settings. Columns are aligned; ends with a newline."""
    out: list[str] = []
    f = config.file
    if f is not None:
        why = {"--config": "named by --config", f"env {ENV_VAR}": f"named by ${ENV_VAR}",
               "default": f"the default location (neither --config nor ${ENV_VAR} given)"}[f.chosen_by]
        state = "read" if f.exists else "not found: no hosts from a file"
        out.append(f"config file: {f.shown}")
        out.append(f"  chosen because: {why}")
        out.append(f"  {state}")
        if quick:
            out.append("  hosts: the quick forms given (the file's [defaults] and [settings] apply)")
    rows: list[tuple[str, str, str]] = []
    for spec in config.hosts:
        src = config.sources.get(spec.name, {})
        rows.append(("", "", ""))
        rows.append((f"host {spec.name}", "", ""))
        for key in HOST_KEYS:
            rows.append((f"  {key}", _shown(spec, key), src.get(key, "default")))
        resolved = resolve_ssh(spec.target)
        if resolved is not None:
            user, host, port = resolved
            host = f"[{host}]" if ":" in host else host
            how = ("as ~/.ssh/config resolves it (asyncssh)" if os.path.isfile(os.path.expanduser("~/.ssh/config"))
                   else "no ~/.ssh/config: the local user, port 22")
            rows.append(("  (connects to)", f"{user}@{host}:{port}", how))
    if not config.hosts:
        rows.append(("", "", ""))
        rows.append(("hosts: none", "", ""))
    rows.append(("", "", ""))
    rows.append(("settings", "", ""))
    for key in SETTING_KEYS:
        value = getattr(config, key)
        text = ("true" if value else "false") if isinstance(value, bool) else f"{value}"
        rows.append((f"  {key}", text, config.setting_sources.get(key, "default")))
    w0 = max(len(r[0]) for r in rows if r[1])
    w1 = max(len(r[1]) for r in rows if r[1])
    for a, b, c in rows:
        out.append(f"{a:<{w0}}  {b:<{w1}}  {c}".rstrip() if b else a)
    return "\n".join(out) + "\n"


def _shown(spec: HostSpec, key: str) -> str:
    value = getattr(spec, key)
    if key == "ssh":
        return spec.target
    if key == "port" and value is None:
        return f"{DEFAULT_PORTS[spec.engine]} (the engine's)" if spec.engine in DEFAULT_PORTS else \
            "(the port the log names, else the detected engine's default; none guessed before)"
    if key == "health_url" and value is None:
        return "(GET /health on the port, on the host)"
    if key == "hf_cache" and value is None:
        return "(from the unit's Environment= and user)"
    if value is None:
        return "(detected from the log)" if key == "engine" else "-"
    if key == "notify":
        return ", ".join(value) if value else "(none)"
    if key == "webhook_url":
        return url_label(value)  # the path is often a secret token
    if key == "stall_after_s":
        if not value:
            return "120 s in every phase"
        return ", ".join(f"{p} {v:g} s" for p, v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _listen(text: str) -> str:
    """``serve --listen``: HOST:PORT, checked (:func:`tui.serve.parse_listen`), kept as given."""
    from tui.serve import parse_listen

    try:
        parse_listen(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _viewers(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 64:
        raise argparse.ArgumentTypeError(f"a number of viewers from 1 to 64: {text!r}")
    return int(text)


def _speed(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.1 <= value <= 1000:
        raise argparse.ArgumentTypeError("speed must be between 0.1 and 1000")
    return value


def _demo(args: argparse.Namespace) -> int:
    import tempfile

    from probes.store.history import History
    from tui.demo_app import make_demo_app

    # The demo's history (made-up earlier starts, for the typical durations and ETAs) lives in a
    # folder of its own that goes away with the demo; the user's history is never touched.
    with tempfile.TemporaryDirectory(prefix="upwatch-demo-") as folder:
        history = History(f"{folder}/history.sqlite3")
        try:
            make_demo_app(speed=DEMO_SPEED if args.speed is None else args.speed, read_only=args.read_only, history=history, seed_history=True).run()
        finally:
            history.close()
    return EXIT_OK


def _prompt(name: str) -> None:
    """Said before reading a terminal: the operator may be typing the log, or may have forgotten it."""
    print(f"upwatch replay: reading {name} (Ctrl-D to end)", file=sys.stderr, flush=True)


def _replay(args: argparse.Namespace) -> int:
    info: dict = {}
    if args.markdown and args.json:
        print("upwatch replay: --json and --markdown: give one", file=sys.stderr)
        return EXIT_USAGE
    from tui.host_report import spooled

    again, cleanup = args.path, lambda: None
    try:
        if args.markdown:  # its decisive line's context is read again: standard input is kept
            if args.path == "-" and sys.stdin is not None and sys.stdin.isatty():
                _prompt("standard input")
            again, reading, cleanup = spooled(args.path, lambda p: read_path(
                p, engine=args.engine, unit=args.unit, info=info))
        else:
            reading = read_path(args.path, engine=args.engine, unit=args.unit, info=info, on_terminal=_prompt)
    except LogReadError as exc:
        print(f"upwatch replay: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    if args.unit and info.get("form") == "text":
        print("upwatch replay: --unit applies to journal input only; read the whole text log",
              file=sys.stderr)
    units = info.get("units") or []
    if not args.unit and len(units) > 1:
        print(f"upwatch replay: this journal holds entries of {len(units)} units, read as one; pick one "
              f"with --unit ({', '.join(one_line(u, max_chars=80) for u in units[:6])}{', ...' if len(units) > 6 else ''})", file=sys.stderr)
    try:
        if args.json:
            sys.stdout.write(json_text(replay_json(reading), indent=2))
            sys.stdout.write("\n")
        elif args.markdown:
            from tui.host_report import replay_report

            unit = args.unit if args.unit is None or "." in args.unit else f"{args.unit}.service"
            sys.stdout.write(replay_report(again, reading, name="standard input" if args.path == "-" else args.path,
                                           unit=unit))
        else:
            sys.stdout.write(format_timeline(reading, args.path))
        sys.stdout.flush()
    except BrokenPipeError:
        # `upwatch replay x | head`: the reader went away; that is not an error of ours.
        sys.stdout = None  # type: ignore[assignment]
    finally:
        cleanup()
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
