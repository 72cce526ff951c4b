"""Every per-engine table outside ``probes/logs/engines/`` names every engine of
:data:`probes.logs.engines.ENGINES`, and names no engine that is not there.

Adding an engine module (and its entry in ``ENGINES``) makes these tests name each table still
missing it: the checklist in docs/architecture.md ("Where to add things") relies on them.
"""

from __future__ import annotations

from probes.fold.model import BINDS_AFTER_LOADING
from probes.fold.verdict import ENGINE_NAMES
from probes.logs.classify import _FLAVOR_ENGINE, unit_engine
from probes.logs.engines import ENGINES
from probes.spec import DEFAULT_PORTS


def test_every_engine_has_a_default_port() -> None:
    # Without one, the health probe of a host whose port is neither configured nor in the log
    # would ask port 8000 (health_target's fallback): a guess, which upwatch promises not to make.
    assert set(ENGINES) - set(DEFAULT_PORTS) == set(), "add them to DEFAULT_PORTS in probes/spec.py"
    assert set(DEFAULT_PORTS) - set(ENGINES) == set(), "DEFAULT_PORTS names engines not in ENGINES"


def test_every_engine_has_a_name_for_sentences() -> None:
    assert set(ENGINES) - set(ENGINE_NAMES) == set(), "add them to ENGINE_NAMES in probes/fold/verdict.py"
    assert set(ENGINE_NAMES) - set(ENGINES) == set(), "ENGINE_NAMES names engines not in ENGINES"


def test_a_unit_named_after_an_engine_names_that_engine() -> None:
    missed = {name: unit_engine(f"{name}.service") for name in ENGINES if unit_engine(f"{name}.service") != name}
    assert missed == {}, "add the engine id to _UNIT_WORDS in probes/logs/classify.py"


def test_the_partial_engine_tables_name_only_known_engines() -> None:
    # Not every engine binds its port only after loading, nor has a prefix style of its own: these
    # tables may leave an engine out, but an id in them that is not an engine is a typo.
    assert BINDS_AFTER_LOADING - set(ENGINES) == set(), "BINDS_AFTER_LOADING in probes/fold/model.py"
    flavored = {engine for engine, _strong in _FLAVOR_ENGINE.values()}
    assert flavored - set(ENGINES) == set(), "_FLAVOR_ENGINE in probes/logs/classify.py"
