"""Widgets of a host's detail view: the phase timeline, GPU history and the systemd unit.

Each renders from a :class:`HostState` handed to ``update_state(state, now=None)`` and repaints
only when what it shows changed. Host text goes through :func:`widgets.text.host_text`.
"""

from __future__ import annotations

import signal
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.widget import Widget

from probes.fold.eta import typical_words
from probes.fold.download import download_words
from probes.data.state import HostState
from widgets.fmt import PHASE_LABELS, duration, hms, level_block
from widgets.text import host_text, plain

__all__ = ["PhaseTimeline", "GpuHistory", "UnitPanel", "spark"]


def spark(values: list[float | None], width: int, top: float) -> str:
    """The last ``width`` values as a sparkline of block characters on an absolute scale
    ``0..top``; a None value is a gap (a space)."""
    vals = values[-width:] if width > 0 else []
    out = []
    for v in vals:
        if v is None:
            out.append(" ")
        else:
            f = max(0.0, min(1.0, v / top)) if top else 0.0
            out.append(level_block(f))
    return "".join(out).rjust(max(0, width))


class _StateView(Widget):
    """A widget that renders a HostState (and a clock) given to :meth:`update_state`."""

    DEFAULT_CSS = """
    _StateView { height: auto; width: 1fr; }
    """

    def __init__(self, state: HostState | None = None, now: float | None = None, *, name: str | None = None,
                 id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._state = state
        self._now = now

    @property
    def state(self) -> HostState | None:
        """The state shown, or None."""
        return self._state

    def update_state(self, state: HostState, now: float | None = None) -> None:
        """Show ``state``; ``now`` (epoch seconds) is used for running durations."""
        if state == self._state and now == self._now:
            return
        self._state, self._now = state, now
        self.refresh(layout=True)

    def _style(self, name: str) -> Style:
        return self.get_component_rich_style(name, partial=True)

    def render(self) -> Text:
        if self._state is None:
            return Text("no data yet", style=self._style("detail--muted"), end="")
        return self.render_text(self._state, self._now, self.size.width or 80)

    def render_text(self, state: HostState, now: float | None, width: int) -> Text:  # pragma: no cover
        raise NotImplementedError


_DETAIL_CSS = """
    & > .detail--muted { color: $foreground-muted; }
    & > .detail--ok { color: $text-success; }
    & > .detail--current { color: $text-primary; text-style: bold; }
    & > .detail--warning { color: $text-warning; }
    & > .detail--error { color: $text-error; text-style: bold; }
    & > .detail--bar { color: $text-primary; }
    & > .detail--util { color: $text-accent; }
"""
_DETAIL_CLASSES = {"detail--muted", "detail--ok", "detail--current", "detail--warning", "detail--error",
                   "detail--bar", "detail--util"}


class PhaseTimeline(_StateView):
    """Each phase of the current start: label, when it began (HH:MM:SS UTC), how long it took, and
    the line that began it. The current phase's duration runs from ``now``. With a start history
    (``state.typical``), each phase's median (``~1m40s``) follows its duration, and a last line
    says how many earlier starts the medians are over, and one more, while loading, where this start
    stands (:func:`probes.fold.eta.typical_words`). Below, while a start downloads: the download's bytes,
    rate and ETA, the folder measured and when; or why it cannot be measured."""

    COMPONENT_CLASSES: ClassVar[set[str]] = _DETAIL_CLASSES
    DEFAULT_CSS = "PhaseTimeline { height: auto; width: 1fr; " + _DETAIL_CSS + "}"

    def render_text(self, state: HostState, now: float | None, width: int) -> Text:
        out = Text(no_wrap=True, end="")
        if not state.phases:
            out.append("no phase yet", self._style("detail--muted"))
            return out
        last = len(state.phases) - 1
        for i, span in enumerate(state.phases):
            if i:
                out.append("\n")
            current = i == last and state.state in ("loading", "failed", "stopped")
            if current and state.state == "failed":
                icon, style = "✗", self._style("detail--error")
            elif current and state.state == "loading":
                icon, style = "▸", self._style("detail--current")
            elif span.phase == "ready":
                icon, style = "●", self._style("detail--ok")
            else:
                icon, style = "✓", Style()
            label = PHASE_LABELS.get(span.phase, plain(span.phase, max_chars=14))
            if span.duration_s is not None:
                dur = duration(span.duration_s)
            elif current and state.state == "loading" and now and span.began is not None:
                dur = duration(now - span.began) + "…"
            elif current and state.state == "failed" and state.failed_at is not None and span.began is not None:
                dur = duration(state.failed_at - span.began)
            elif span.phase == "ready" and now and span.began is not None:
                dur = "up " + duration(now - span.began)
            else:
                dur = "…" if current else "?"
            line = Text(no_wrap=True, end="")
            line.append(f"{icon} {label:<13} ", style)
            line.append(f"{hms(span.began)} ", self._style("detail--muted"))
            line.append(f"{dur:>8}  ")
            if state.typical is not None:
                med = state.typical.phase_s(span.phase)
                line.append(f"{'~' + duration(med) if med is not None else '':>6}  ", self._style("detail--muted"))
            rest = max(0, width - line.cell_len)
            if span.text and rest > 4:
                line.append_text(host_text(span.text, max_chars=rest, style=self._style("detail--muted")))
            line.truncate(width)
            out.append_text(line)
        t = state.typical
        if t is not None:
            words = f"{t.n} earlier start{'s' if t.n != 1 else ''}"
            words += f": ready in ~{duration(t.total_s)}" if t.total_s is not None else ""
            out.append("\n")
            out.append(words[:max(1, width)], self._style("detail--muted"))
            now_words = typical_words(state, now) if now else ""
            if now_words:
                out.append("\n")
                out.append(now_words[:max(1, width)],
                           self._style("detail--warning" if "slower than usual" in now_words else "detail--muted"))
        for line in self._download_lines(state, width):
            out.append("\n")
            out.append_text(line)
        return out

    def _download_lines(self, state: HostState, width: int) -> list[Text]:
        lines = []
        d = state.download
        if d is not None:
            lines.append(Text("  ↓ " + download_words(state), style=self._style("detail--current"), end=""))
            where = Text("    ", end="")
            where.append_text(host_text(d.path, max_chars=300, style=self._style("detail--muted")))
            where.append(f" · measured {hms(d.sampled_at)}", self._style("detail--muted"))
            lines.append(where)
        failure = state.failure("download")
        if failure is not None:
            line = Text(f"  download: n/a since {hms(failure.time)} — ", style=self._style("detail--error"), end="")
            line.append_text(host_text(failure.message, max_chars=300))
            lines.append(line)
        for line in lines:
            line.no_wrap = True
            line.truncate(width)
        return lines


class GpuHistory(_StateView):
    """One line per GPU: memory use and utilisation as sparklines of recent samples (absolute
    scales: 0-100 %), with the latest values; ``n/a`` where a GPU never gave a value. A first line
    names the boards and the time of the last sample."""

    COMPONENT_CLASSES: ClassVar[set[str]] = _DETAIL_CLASSES
    DEFAULT_CSS = "GpuHistory { height: auto; width: 1fr; " + _DETAIL_CSS + "}"

    def render_text(self, state: HostState, now: float | None, width: int) -> Text:
        out = Text(no_wrap=True, end="")
        muted = self._style("detail--muted")
        failure = state.failure("gpu")
        if failure is not None:
            head = Text(f"GPU: n/a since {hms(failure.time)} — ", style=self._style("detail--error"), end="")
            head.append_text(host_text(failure.message, max_chars=300))
            head.truncate(width)
            out.append_text(head)
            out.append("\n")
        reading = state.gpus
        if reading is None or not reading.gpus:
            out.append("GPU: waiting for the first sample" if failure is None else "no GPU sample", muted)
            return out
        names = sorted({plain(g.name, max_chars=40) for g in reading.gpus})
        summary = f"{len(reading.gpus)} × {', '.join(names)} · last sample {hms(reading.time)}"
        out.append(summary[:width], muted)
        # "GPU0 mem <spark> 100%  util <spark> 100%  62°C 310W"
        extra_w = 12
        fixed = 6 + 4 + 5 + 7 + 5
        spark_w = max(4, (width - fixed - extra_w) // 2)
        for i, g in enumerate(reading.gpus):
            hist = state.gpu_history[i] if i < len(state.gpu_history) else ()
            mems = [m for m, _ in hist] or [g.mem_fraction]
            utils = [None if u is None else float(u) for _, u in hist] or [
                None if g.util_pct is None else float(g.util_pct)]
            line = Text(no_wrap=True, end="")
            line.append(f"GPU{g.index:<2} ", self._style("detail--muted"))
            if g.note:
                line.append("✗ ", self._style("detail--error"))
                line.append_text(host_text(g.note, max_chars=40, style=self._style("detail--error")))
                line.append(" ")
            line.append("mem ", self._style("detail--muted"))
            if all(m is None for m in mems):
                line.append("n/a".ljust(spark_w), muted)
            else:
                line.append(spark(mems, spark_w, 1.0), self._style("detail--bar"))
            f = g.mem_fraction
            line.append(f" {'n/a' if f is None else f'{f:.0%}':>4}", muted if f is None else Style())
            line.append("  util ", self._style("detail--muted"))
            if all(u is None for u in utils):
                line.append("n/a".ljust(spark_w), muted)
            else:
                line.append(spark(utils, spark_w, 100.0), self._style("detail--util"))
            u = g.util_pct
            line.append(f" {'n/a' if u is None else f'{u}%':>4}", muted if u is None else Style())
            bits = []
            if g.temp_c is not None:
                bits.append(f"{g.temp_c}°C")
            if g.power_w is not None:
                bits.append(f"{g.power_w:.0f}W")
            if bits:
                line.append("  " + " ".join(bits), muted)
            line.truncate(width)
            out.append("\n")
            out.append_text(line)
        return out


def _signal_name(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


class UnitPanel(_StateView):
    """The verdict with its evidence, then the systemd unit: active/sub state, result, restarts,
    main PID, memory, start time, and how the main process last ended; a unit that does not exist
    says so plainly."""

    COMPONENT_CLASSES: ClassVar[set[str]] = _DETAIL_CLASSES
    DEFAULT_CSS = "UnitPanel { height: auto; width: 1fr; " + _DETAIL_CSS + "}"

    _ACTIVE = {"active": "detail--ok", "activating": "detail--current", "reloading": "detail--current",
               "deactivating": "detail--warning", "failed": "detail--error", "inactive": "detail--muted"}

    _LEVEL = {"error": "detail--error", "warning": "detail--warning", "info": "detail--current", "ok": "detail--ok"}

    def _verdict(self, state: HostState, width: int) -> list[Text]:
        """The verdict, wrapped, and its evidence (one short line each, at most 6)."""
        v = state.verdict
        if v is None:
            return []
        import textwrap

        style = self._style(self._LEVEL.get(v.level, "detail--muted"))
        words = textwrap.wrap(plain(v.sentence, max_chars=600), max(20, width),
                              break_on_hyphens=False)  # "reset-failed", "--max-model-len" stay whole
        lines = [Text(ln, style=style, end="") for ln in words or [""]]
        for ev in v.evidence[:6]:
            lines.append(Text("  · " + plain(ev, max_chars=300), style=self._style("detail--muted"), end=""))
        if len(v.evidence) > 6:
            lines.append(Text(f"  · and {len(v.evidence) - 6} more", style=self._style("detail--muted"), end=""))
        return lines

    def render_text(self, state: HostState, now: float | None, width: int) -> Text:
        head = self._verdict(state, width)
        body = self._unit_text(state, now, width)
        if not head:
            return body
        return Text("\n", no_wrap=True, end="").join([*head, Text("", end=""), body])

    def _unit_text(self, state: HostState, now: float | None, width: int) -> Text:
        out = Text(no_wrap=True, end="")
        label = self._style("detail--muted")
        failure = state.failure("unit")
        if failure is not None:
            out.append(f"unit: n/a since {hms(failure.time)} — ", self._style("detail--error"))
            out.append_text(host_text(failure.message, max_chars=300))
            out.append("\n")
        u = state.unit_state
        if u is None:
            out.append("unit ", label)
            out.append_text(host_text(state.unit, max_chars=80))
            out.append(": waiting for systemctl show", self._style("detail--muted"))
            return out
        name = host_text(u.unit or state.unit, max_chars=80)
        if u.load_state != "loaded":
            out.append_text(name)
            word = "NOT FOUND" if u.load_state == "not-found" else plain(u.load_state, max_chars=30).upper()
            out.append(f"  {word}", self._style("detail--error"))
            out.append(f"  (LoadState={plain(u.load_state, max_chars=30)}: systemd has no such unit on this host)"
                       if u.load_state == "not-found" else f"  (LoadState={plain(u.load_state, max_chars=30)})",
                       self._style("detail--muted"))
            return out

        def row(key: str, value: Text | str, style: Style | None = None) -> None:
            out.append("\n")
            out.append(f"{key:<11}", label)
            if isinstance(value, Text):
                out.append_text(value)
            else:
                out.append(value, style or Style())

        out.append_text(name)
        out.append("  ")
        active = plain(u.active_state, max_chars=30)
        sub = plain(u.sub_state, max_chars=30)
        style = self._style(self._ACTIVE.get(u.active_state, "detail--muted"))
        if u.sub_state == "auto-restart":
            style = self._style("detail--warning")
        out.append(f"{active} ({sub})", style)
        if u.result:
            ok = u.result == "success"
            row("result", plain(u.result, max_chars=40), self._style("detail--ok" if ok else "detail--error"))
        row("restarts", "n/a" if u.n_restarts is None else str(u.n_restarts),
            self._style("detail--muted") if u.n_restarts is None else
            self._style("detail--warning") if u.n_restarts else None)
        row("main PID", "none" if u.main_pid is None else str(u.main_pid),
            self._style("detail--muted") if u.main_pid is None else None)
        row("memory", "n/a" if u.memory_bytes is None else f"{u.memory_bytes / 2**30:.1f} GiB",
            self._style("detail--muted") if u.memory_bytes is None else None)
        if u.started_at is not None:
            ago = f" ({duration(now - u.started_at)} ago)" if now else ""
            row("started", f"{hms(u.started_at)}{ago}")
        if u.exec_main_code:  # 0: the main process has not exited (systemd's si_code 0)
            code = {1: "exited", 2: "killed", 3: "dumped core"}.get(u.exec_main_code, f"code {u.exec_main_code}")
            if u.exec_main_status is None:
                how = code
            elif u.exec_main_code in (2, 3):
                how = f"{code} by {_signal_name(u.exec_main_status)}"
            else:
                how = f"{code} with status {u.exec_main_status}"
            bad = not (u.exec_main_code == 1 and u.exec_main_status == 0)
            row("last exit", how, self._style("detail--error") if bad else None)
        row("read at", hms(u.time), self._style("detail--muted"))
        lines = out.split("\n")
        for ln in lines:
            ln.truncate(width)
        return Text("\n", no_wrap=True, end="").join(lines)
