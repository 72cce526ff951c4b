"""The ``upwatch`` command line: a thin layer that parses arguments and calls the right piece.

``upwatch --demo [--speed N] [--fleet N]`` opens the dashboard on four (or N) simulated hosts that replay recorded
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
from collections.abc import Mapping, Sequence

from probes.hosttext import json_text, one_line
from probes.sources.logfile import LogReadError, read_path
from probes.spec import DEFAULT_PORTS, HostSpec
from tui.config import (ENV_VAR, HOST_KEYS, SETTING_KEYS, Config, ConfigError, load_config, looks_like_quick_form, resolve_ssh)
from tui.cli_args import COMMANDS, DEMO_SPEED, FLEET_HOST_SECONDS, build_dashboard_parser, build_parser
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
    if getattr(args, "fleet", None) is not None and (not args.demo or command is not None):
        parser.error("--fleet sets how many hosts the demo dashboard runs: it applies with --demo only, "
                     "without a command")
    fleet = getattr(args, "fleet", None)
    speed = args.speed if args.speed is not None else DEMO_SPEED
    if fleet is not None and fleet * speed > FLEET_HOST_SECONDS:
        # 300 hosts at the default 10x froze the dashboard (a fresh user): they replay like 3,000
        # real hosts. 128 real hosts is the size measured to stay responsive (bench/).
        parser.error(f"--fleet {fleet} at --speed {speed:g} replays like {fleet * speed:,.0f} real hosts, more "
                     f"than the dashboard keeps up with: keep --fleet x --speed at most {FLEET_HOST_SECONDS:,} "
                     f"(e.g. --fleet {fleet} --speed {max(1, FLEET_HOST_SECONDS // fleet)})")
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
    takes_value = {"--config", "--speed", "--fleet"}
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
        from probes.fold.notify import url_label  # only `upwatch config` needs it (and its imports)

        return url_label(value)  # the path is often a secret token
    if key == "stall_after_s":
        if not value:
            return "120 s in every phase"
        return ", ".join(f"{p} {v:g} s" for p, v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _demo(args: argparse.Namespace) -> int:
    import tempfile

    from probes.store.history import History
    from tui.demo_app import make_demo_app

    # The demo's history (made-up earlier starts, for the typical durations and ETAs) lives in a
    # folder of its own that goes away with the demo; the user's history is never touched.
    with tempfile.TemporaryDirectory(prefix="upwatch-demo-") as folder:
        history = History(f"{folder}/history.sqlite3")
        try:
            names = None if args.fleet is None else [f"gpu-{i:03d}" for i in range(1, args.fleet + 1)]
            make_demo_app(speed=DEMO_SPEED if args.speed is None else args.speed, read_only=args.read_only,
                          history=history, seed_history=True, names=names).run()
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
    again, cleanup = args.path, lambda: None
    try:
        if args.markdown:  # its decisive line's context is read again: standard input is kept
            from tui.host_report import spooled  # (textual comes with it: only for --markdown)

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
