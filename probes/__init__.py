"""upwatch's core: what the outside world says and what it means. Never imports a UI library.

The subpackages follow the data flow (docs/architecture.md; import-linter contracts in
``pyproject.toml`` keep each layer importing only those below it):

* :mod:`probes.watch.watcher`: the watcher, one per host, runs the sources' loops and feeds the model.
* :mod:`probes.ops`: actions on a unit (restart, stop, kill) and the safe restart's GPU wait.
* :mod:`probes.store`: the data folder, the start history and the audit log.
* :mod:`probes.sources`: each probe's command and the parser of its answer (unit, journal, GPUs,
  health, download, a saved log file).
* :mod:`probes.fold`: the pure fold of events into host state, the verdict, the ETA, notices.
* :mod:`probes.logs`: line cleaning, prefixes, decoders, the engines' rules and the startup reader.
* :mod:`probes.transport`: the Runner protocol: SSH, this machine, the replayed demo hosts.
* :mod:`probes.data`, :mod:`probes.spec`, :mod:`probes.clock`, :mod:`probes.hosttext`: value types
  and vocabulary, what to watch on a host, clocks, and the one sanitiser of host text.
"""
