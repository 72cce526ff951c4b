"""Which model a start serves, and with which arguments: the key that makes two starts comparable.

Engines print their arguments once per start. :func:`identify` reads one log line and returns the
model and a short hash of the argument dump, or None when the line carries neither:

- SGLang (0.4-0.5): the first line, ``server_args=ServerArgs(model_path='…', …)`` (about 9 KB).
  ``random_seed`` is drawn at random when not set, so it is left out of the hash.
- vLLM (0.8-0.15): ``non-default args: {'model': '…', …}`` (the arguments that differ from the
  defaults; the hash); before 0.8 ``api_server.py:…] args: Namespace(…)`` (the hash);
  ``Initializing a V1 LLM engine (v…) with config: model='…', …`` (``an LLM engine`` before V1) and
  ``Starting to load model X...`` (the model only).
- TGI: the ``Args {`` dump's ``model_id: "…",`` line (the model only).
- TRT-LLM's launcher scripts: ``Starting trtllm-serve for model X on port N``.
- llama.cpp: ``load_model: loading model '…'``.

Sources: the real logs in ``tests/fixtures/logs`` and ``tests/fixtures/logs-extra``.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Identity:
    """What one line says about the start.

    Attributes:
        model: the model as the engine names it: a hub id (``openai/whisper-large-v3``) or a
            local path; None when the line does not say.
        args_hash: 12 hex digits of SHA-256 over the engine's argument dump (volatile fields
            removed), or None when the line is not a full dump.
    """

    model: str | None
    args_hash: str | None = None


_SGLANG_RE = re.compile(r"server_args=ServerArgs\((?P<args>.*)\)\s*$")
_SGLANG_MODEL_RE = re.compile(r"\bmodel_path='(?P<m>[^']*)'")
_SGLANG_VOLATILE_RE = re.compile(r",? ?\brandom_seed=\d+")
_VLLM_ARGS_RE = re.compile(r"non-default args: (?P<args>\{.*\})\s*$")
_VLLM_ARGS_MODEL_RE = re.compile(r"'model(?:_tag)?': '(?P<m>[^']*)'")
_VLLM_NAMESPACE_RE = re.compile(r"(?:^|\] )args: (?P<args>Namespace\(.*\))\s*$")
_VLLM_NAMESPACE_MODEL_RE = re.compile(r"\bmodel='(?P<m>[^']*)'")
_VLLM_CONFIG_RE = re.compile(r"Initializing an? (?:V\d )?LLM engine .*? with config: model='(?P<m>[^']*)'")
_VLLM_LOAD_RE = re.compile(r"Starting to load model (?P<m>\S*?[^.\s])(?:\.\.\.)?\s*$")
_TGI_RE = re.compile(r'^\s*model_id: "(?P<m>[^"]*)",\s*$')
_TRTLLM_RE = re.compile(r"Starting trtllm-serve for model (?P<m>\S+)")
_LLAMACPP_RE = re.compile(r"load_model: loading model '(?P<m>[^']*)'")
#: The lines that name the model only, each with text every match of it holds, in order.
_MODEL_LINES = ((" with config: model='", _VLLM_CONFIG_RE), ("Starting to load model ", _VLLM_LOAD_RE),
                ('model_id: "', _TGI_RE), ("Starting trtllm-serve for model ", _TRTLLM_RE),
                ("load_model: loading model '", _LLAMACPP_RE))


def args_hash(dump: str) -> str:
    """12 hex digits of SHA-256 over ``dump`` (UTF-8, surrogates replaced)."""
    return hashlib.sha256(dump.encode("utf-8", "replace")).hexdigest()[:12]


def identify(text: str) -> Identity | None:
    """The model and argument hash one log line gives, or None (most lines: cheap to ask).

    Args:
        text: one line as the server wrote it (prefixes such as ``(APIServer pid=1) INFO …`` allowed).

    Returns:
        An :class:`Identity`; ``args_hash`` only from a full argument dump (SGLang's
        ``server_args=``, vLLM's ``non-default args:``).
    """
    if "model" not in text:
        return None
    if "server_args=ServerArgs(" in text:
        m = _SGLANG_RE.search(text)
        if m is None:
            return None
        args = m.group("args")
        mm = _SGLANG_MODEL_RE.search(args)
        return Identity(mm.group("m") if mm else None, args_hash(_SGLANG_VOLATILE_RE.sub("", args)))
    if "non-default args: {" in text:
        m = _VLLM_ARGS_RE.search(text)
        if m is None:
            return None
        args = m.group("args")
        models = dict.fromkeys(mm.group("m") for mm in _VLLM_ARGS_MODEL_RE.finditer(args))
        return Identity(next(iter(models), None), args_hash(args))
    if "args: Namespace(" in text:
        m = _VLLM_NAMESPACE_RE.search(text)
        if m is not None:
            args = m.group("args")
            mm = _VLLM_NAMESPACE_MODEL_RE.search(args)
            return Identity(mm.group("m") if mm else None, args_hash(args))
    for needle, pattern in _MODEL_LINES:
        if needle not in text:
            continue  # text every match holds: most lines are ruled out without a regex call
        m = pattern.search(text)
        if m is not None and m.group("m"):
            return Identity(m.group("m"))
    return None


_PORT_ARG_RE = re.compile(r"(?:[(,] |\{|, )(?:port=|'port': )(?P<p>\d{1,5})\b")
_LISTEN_RE = re.compile(r"(?:Uvicorn running on|API server(?: \d+)? on|server is listening on) "
                        r"https?://[^\s/]*:(?P<p>\d{1,5})\b")
_TRTLLM_PORT_RE = re.compile(r"Starting trtllm-serve for model \S+ on port (?P<p>\d{1,5})\b")


def listen_port(text: str) -> int | None:
    """The TCP port the server says it serves on, from one log line, or None.

    Lines (the same sources as :func:`identify`): SGLang's ``server_args=ServerArgs(… port=30006, …)``,
    vLLM's ``non-default args: {… 'port': 8001 …}`` and ``args: Namespace(… port=8000, …)``,
    Uvicorn's ``Uvicorn running on http://0.0.0.0:30000`` (SGLang, vLLM, TRT-LLM), vLLM's
    ``Starting vLLM API server 0 on http://0.0.0.0:8000``, llama.cpp's ``server is listening on
    http://127.0.0.1:8080`` and TRT-LLM launchers' ``… on port 8355``. ``nccl_port=``,
    ``metrics_port=`` and the like are not the server's port.
    """
    if "port" not in text and "http" not in text:
        return None
    m = None
    if "server_args=ServerArgs(" in text or "non-default args: {" in text or "args: Namespace(" in text:
        m = _PORT_ARG_RE.search(text)
    if m is None and "://" in text:
        m = _LISTEN_RE.search(text)
    if m is None and "trtllm-serve" in text:
        m = _TRTLLM_PORT_RE.search(text)
    if m is None:
        return None
    port = int(m.group("p"))
    return port if 0 < port < 65536 else None

