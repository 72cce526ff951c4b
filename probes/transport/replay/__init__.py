"""A host that replays a recorded scenario, for the demo and the tests: one module per thing it
emulates, nothing touching a network.

* :mod:`~probes.transport.replay.scenario`: what a replayed host is made of (``Scenario`` and its
  timelines, ``stamp_journal``, ``journal_value``, ``UNIT_DEFAULTS``).
* :mod:`~probes.transport.replay.host`: the simulated host as it plays (clock, outages, the unit's
  life as actions change it).
* :mod:`~probes.transport.replay.journalctl`, :mod:`~probes.transport.replay.systemctl`,
  :mod:`~probes.transport.replay.nvidia_smi`: each tool's command line and output;
  :mod:`~probes.transport.replay.http_server`: the model server's HTTP API;
  :mod:`~probes.transport.replay.command_line`: what the command lines share.
* :mod:`~probes.transport.replay.runner`: ``ReplayRunner``, the
  :class:`~probes.transport.runner.Runner` that hands each command to its tool.

Names are imported from their modules; this package re-exports nothing.
"""
