"""The engines' vocabulary (probes/logs/engines/messages/*.toml, read from each engine's source)
against the rule tables (issue 25).

* Every table is in the format of :mod:`probes.logs.engines.vocabulary`, ids unique, samples one line.
* Every message is read as it means (:func:`probes.logs.why.understood`: a rule of the same phase,
  cause, readiness or stop matches one of its samples), except those listed in
  ``tests/fixtures/messages-not-yet-read.txt``; each of those must still be unread (a rule that
  learns one fails here until it is taken off the list), so the list only shrinks.
* Rule alternatives with no sample line (the rule's own example or a table's sample) are counted,
  and the count may only go down.
"""

from __future__ import annotations

import re

import pytest

from conftest import FIXTURES
from probes.logs.engines import ENGINES, common
from probes.logs.engines.patterns import split_alternation
from probes.logs.engines.vocabulary import TABLES, VocabularyError, all_messages, messages, parse_table
from probes.logs.why import explain, message_for, sample_msg, understood

NOT_YET = set((FIXTURES / "messages-not-yet-read.txt").read_text().split())
#: Rule alternatives (of 460 at the count's writing) that no sample line matches yet.
ALTERNATIVES_WITHOUT_SAMPLE = 154
MESSAGES = [m for m in all_messages()]


def test_every_table_is_written_and_large() -> None:
    for t in TABLES:
        assert len(messages(t)) >= 40, t


@pytest.mark.parametrize("msg", MESSAGES, ids=lambda m: f"{m.table}/{m.id}")
def test_every_message_is_read_as_it_means(msg) -> None:
    key = f"{msg.table}/{msg.id}"
    if key in NOT_YET:
        assert not understood(msg), f"{key} is read right now: take it off messages-not-yet-read.txt"
    else:
        assert understood(msg), f"no rule reads {key} ({msg.means}) in {msg.samples[0]!r}"


def test_the_not_yet_list_names_real_messages() -> None:
    assert NOT_YET <= {f"{m.table}/{m.id}" for m in MESSAGES}


def test_rule_alternatives_without_a_sample_only_go_down() -> None:
    samples = [sample_msg(s) for m in MESSAGES for s in m.samples]
    rules = list(common.RULES) + [r for e in ENGINES.values() for r in e.rules]
    missing = []
    for r in rules:
        cands = [r.example, sample_msg(r.example), *samples]
        for alt in split_alternation(r.pattern):
            rx = re.compile(alt, r.flags)
            if not any(rx.search(c) for c in cands):
                missing.append(alt)
    assert len(missing) <= ALTERNATIVES_WITHOUT_SAMPLE, f"new alternatives without a sample: {missing[-5:]}"


@pytest.mark.parametrize("text, why", [
    ('engine = "vllm"\n[[message]]\nid = "a"\nmeans = "phase:nope"\ntext = "x"\nwhere = "y"\nversions = "1"\n'
     'samples = ["x"]\n', "names no phase"),
    ('engine = "vllm"\n[[message]]\nid = "a"\nmeans = "error:oops"\ntext = "x"\nwhere = "y"\nversions = "1"\n'
     'samples = ["x"]\n', "names no cause"),
    ('engine = "vllm"\n[[message]]\nid = "a"\nmeans = "ready"\ntext = "x"\nwhere = "y"\nversions = "1"\n'
     'samples = []\n', "samples"),
    ('engine = "sglang"\n', "not 'vllm'"),
    ('engine = "vllm"\n[[message]\n', "messages/vllm.toml"),
])
def test_a_bad_table_is_refused_with_why(text, why) -> None:
    with pytest.raises(VocabularyError, match=re.escape(why)):
        parse_table("vllm", text)


def test_a_rule_names_the_message_it_stands_for() -> None:
    oom = next(r for r in common.RULES if r.cause == "cuda_oom" and "CUDA out of memory" in r.pattern)
    m = message_for(oom)
    assert m is not None and m.means == "error:cuda_oom" and m.versions


def test_replay_names_the_rule_and_message_behind_a_reading() -> None:
    from probes.sources.logfile import read_path
    reading = read_path(str(FIXTURES / "logs" / "vllm-fail-oom-01.log"))
    why = explain(reading)
    assert why["error"]["line"] == reading.error.line
    assert why["error"]["rule"] is not None
    assert why["state"] == why["error"]


@pytest.mark.parametrize("log, table, message", [
    # Ollama's Go bind error is Ollama's message, not uvicorn's, though one rule reads both.
    ("logs-extra/ollama-restart-loop-port-14", "ollama", "listen_address_in_use"),
    ("logs/llamacpp-fail-oom-01", "llamacpp", "cuda_malloc_failed"),
    ("logs/vllm-fail-oom-01", "runtime", "torch_oom_new"),
])
def test_the_message_named_is_the_one_of_the_line(log, table, message) -> None:
    from probes.sources.logfile import read_path
    ref = explain(read_path(str(FIXTURES / (log + ".log"))))["error"]["message"]
    assert (ref["table"], ref["message"]) == (table, message)


def test_a_ready_line_is_named_as_the_phase_and_the_state() -> None:
    from probes.sources.logfile import read_path
    why = explain(read_path(str(FIXTURES / "logs" / "sglang-ok-01.log")))
    assert why["phase"] == why["state"] and why["state"]["message"]["message"] == "fired_up_ready"
