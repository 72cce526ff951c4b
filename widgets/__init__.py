"""Textual widgets that render a host's state. They do no I/O and no parsing (see docs/architecture.md).

* :mod:`widgets.text`: ``host_text`` / ``plain``, the only way host text reaches a widget (the
  cleaning is :mod:`probes.hosttext`'s; this keeps colours as styles).
* :mod:`widgets.phase_bar`: ``PhaseBar`` (the seven phases in one line), ``progress_label``.
* :mod:`widgets.gpu_strip`: ``GpuStrip`` (memory bar and utilisation per GPU, two lines).
* :mod:`widgets.host_card`: ``HostCard`` (one host, as tall as what it says), ``HostCard.Selected``.
  :mod:`widgets.card_lines`: what its text lines say (pure).
* :mod:`widgets.overview`: ``CardGrid`` (the cards, filling the screen: two columns from 120 cells).
* :mod:`widgets.host_table`: ``HostTable`` (the compact overview: one row per host, sorted, filtered,
  only the rows in view drawn); :mod:`widgets.host_rows`: what a row says (pure).
* :mod:`widgets.log_pane`: ``LogPane`` (capped, filterable, searchable journal lines).
* :mod:`widgets.detail`: ``PhaseTimeline``, ``GpuHistory``, ``UnitPanel``.
* :mod:`widgets.fmt`: clock times (UTC), durations, sizes, phase and rung words.

Colours come only from theme variables (``$success``, ``$error`` ...) in each widget's
``DEFAULT_CSS``; states are CSS classes (``-ready``, ``-failed``, ``-stale`` ...).
"""
