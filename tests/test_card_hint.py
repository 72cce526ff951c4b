"""The hint beside a verdict says only what the verdict's sentence does not (a fresh user read the
demo's gpu-node-2 card say "fix it, then systemctl reset-failed. Hint: ... `systemctl reset-failed`
the unit after the fix."): the card, ``upwatch status``'s text and the Markdown report."""

from __future__ import annotations

from dataclasses import replace

from rich.style import Style

from probes.data.reading import ErrorLine
from probes.data.state import HostState, Verdict
from probes.data.vocab import DEFAULT_HINTS as HINTS
from probes.fold.headline import shown_hint
from probes.spec import HostSpec
from tui.report import markdown_report
from tui.status import format_host
from widgets.card_lines import verdict_text

OOM = ("GPU memory ran out: lower --max-model-len or --max-num-seqs, add --enforce-eager to skip CUDA "
       "graphs, or raise --tensor-parallel-size.")
GAVE_UP = "systemd has stopped restarting it (start limit): `systemctl reset-failed` the unit after the fix."
LOOP = ("Restart loop: 3 starts failed in 2m44s, each CUDA out of memory during init; systemd gave up "
        "(start limit): fix it, then systemctl reset-failed.")


def _failed(hint: str, sentence: str) -> HostState:
    return HostState(host="gpu-node-2", unit="vllm.service", state="failed", phase="init", cause="cuda_oom",
                     error=ErrorLine(7, "torch.OutOfMemoryError: CUDA out of memory", "cuda_oom", hint),
                     hint=hint, verdict=Verdict("error", sentence, kind="restart_loop"))


def _card(s: HostState) -> str:
    return verdict_text(s, lambda name: Style()).plain


def test_a_gave_up_loop_says_reset_failed_once_and_keeps_the_cause_hint():
    s = _failed(f"{OOM} {GAVE_UP}", LOOP)
    assert shown_hint(s) == OOM
    card = _card(s)
    assert card == f"{LOOP} Hint: {OOM}"
    assert card.count("reset-failed") == 1
    text = format_host(HostSpec("gpu-node-2", "vllm.service"), s)
    assert text.count("reset-failed") == 1 and OOM in text
    report = markdown_report(s, [], now=0.0, made_at=0.0)
    assert report.count("reset-failed") == 1 and "GPU memory ran out" in report


def test_the_start_limit_hint_goes_beside_a_verdict_that_says_its_command():
    s = replace(_failed(HINTS["start_limit"], LOOP.replace("each CUDA out of memory during init",
                                                           "the last with start limit hit")), cause="start_limit")
    assert shown_hint(s) == "" and "Hint" not in _card(s)


def test_the_hint_stays_where_the_sentence_lacks_it():
    # Not given up: the sentence says nothing of reset-failed, the hint is the card's only word on it.
    s = _failed(f"{OOM} {GAVE_UP}", "Start failed in Init: CUDA out of memory.")
    assert shown_hint(s) == s.hint and _card(s).endswith(f"Hint: {OOM} {GAVE_UP}")
    s = _failed(HINTS["start_limit"], "Start failed in Init: start limit hit.")
    assert shown_hint(s) == HINTS["start_limit"]
    # No verdict: the whole hint; a verdict that holds the whole hint: none.
    assert shown_hint(replace(s, verdict=None)) == HINTS["start_limit"]
    assert shown_hint(replace(s, verdict=Verdict("error", f"Failed. {HINTS['start_limit']}"))) == ""


def test_every_cause_hint_beside_an_unrelated_verdict_is_whole():
    for cause, hint in HINTS.items():
        s = _failed(f"{hint} {GAVE_UP}", "Start failed in Init: CUDA out of memory.")
        assert shown_hint(s) == s.hint, cause
