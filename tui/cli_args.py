"""The command line's grammar: every subcommand, option and help text of ``upwatch``
(:func:`build_parser`, and :func:`build_dashboard_parser` for the dashboard's own form), and the
``type`` checks of its option values. What each command then does is :mod:`tui.cli`'s.
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Callable

from probes.logs.engines import ENGINES
from tui import __version__
from tui.config import ENV_VAR, HOST_KEYS, SETTING_KEYS, default_config_path, display_path
from tui.duration import parse_duration
from tui.listen import parse_listen

#: ``--demo``'s time compression when ``--speed`` is not given.
DEMO_SPEED = 10.0
#: ``--fleet`` times ``--speed`` at most: simulated hosts replaying at N times real speed cost
#: about N real hosts; 128 hosts at 10x is the largest demo measured to stay responsive (a fresh
#: user's 300 at 10x froze the dashboard on 2 cores).
FLEET_HOST_SECONDS = 1280

#: The subcommands; the first word of argv that is not an option picks one (see :func:`main`).
COMMANDS = ("replay", "config", "status", "wait", "history", "report", "mcp", "exporter", "serve")

#: What ``--listen`` takes (:mod:`tui.listen`), for ``--help``.
_LISTEN_FORMS = ("PORT or :PORT is 127.0.0.1:PORT (this machine only, not every address as Prometheus reads "
                 ":PORT), or HOST:PORT, or [IPv6]:PORT; port 0: any free port")
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

_DESCRIPTION = ("Is the LLM server up yet? Watches LLM servers (SGLang, vLLM, TGI, llama.cpp, Ollama, TensorRT-LLM) starting as systemd units on GPU "
                "hosts over SSH, reads their startup logs and says how far the start has come, and if "
                "it broke, why.")


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--version", action="version", version=f"upwatch {__version__}")
    parser.add_argument("--demo", action="store_true",
                        help="open the dashboard on four simulated hosts replaying recorded real starts")
    parser.add_argument("--speed", type=_speed, default=None, metavar="N",
                        help=f"with --demo only: time runs N times faster than real (default {DEMO_SPEED:g})")
    parser.add_argument("--fleet", type=_fleet, default=None, metavar="N",
                        help="with --demo only: N simulated hosts (2-1000) running the four demo starts in "
                             "turn, to see the overview with many hosts (past 20 at 160x48: one row each); "
                             f"N x --speed at most {FLEET_HOST_SECONDS}, e.g. 128 at the default speed")
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
        prog="upwatch", usage="%(prog)s [-h] [--version] [--demo [--speed N] [--fleet N]] [--config PATH] [--read-only] [HOST ...]\n"
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
               "exit status 130 and one line on stderr (status --watch, the dashboard, serve and exporter,\n"
               "once running: 0).\n\n"
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
                             "progress, error, cause, hint, starts, restart_loop, suspects, service, why: the rule and "
                             "engine message behind the state, phase and decisive line); state is "
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
    exporter.add_argument("--listen", default="127.0.0.1:9464", type=_listen, metavar="HOST:PORT",
                          help=f"where to serve /metrics (default 127.0.0.1:9464: this machine only): {_LISTEN_FORMS}")
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
                       help=f"the address to listen on (default 127.0.0.1:8765): {_LISTEN_FORMS}")
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


def _listen(text: str) -> str:
    """``--listen`` of ``serve`` and ``exporter``: checked (:func:`tui.listen.parse_listen`), kept as given."""
    try:
        parse_listen(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _viewers(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 64:
        raise argparse.ArgumentTypeError(f"a number of viewers from 1 to 64: {text!r}")
    return int(text)


def _fleet(text: str) -> int:
    """``--fleet N``: how many simulated hosts the demo runs (2 to 1000)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 2 <= value <= 1000:
        raise argparse.ArgumentTypeError("a fleet is 2 to 1000 hosts")
    return value


def _speed(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.1 <= value <= 1000:
        raise argparse.ArgumentTypeError("speed must be between 0.1 and 1000")
    return value
