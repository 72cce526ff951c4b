"""upwatch's core: what the outside world says and what it means. Never imports a UI library.

* :mod:`probes.hosttext`: the one sanitiser for host-derived text (escape codes, C0/C1, bidi and
  zero-width characters); every widget, toast, modal and text output uses it.
* :mod:`probes.logline`: raw log lines into clean logical lines with their prefixes parsed.
* :mod:`probes.engines`: one table of patterns per server family.
* :mod:`probes.reader`: the incremental startup reader (phases, progress, failures, restarts).
* :mod:`probes.journal`: ``journalctl -o json`` records.
* :mod:`probes.logfile`: read a saved log in whatever form it comes.
"""
