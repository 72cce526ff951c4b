"""Line cleaning and prefix parsing: every wrapper an operator's log may carry."""

from __future__ import annotations

import pytest

from probes.logs.logline import MAX_LINE_CHARS, date_shaped, date_shaped_bytes, frames, parse


def test_cr_frames_are_logical_lines_and_empty_frames_drop() -> None:
    raw = "\r  0%|  | 0/3 [00:00<?, ?it/s]\rCapturing batches (bs=4):  33%|###  | 1/3 [00:00<00:00,  4.86it/s]\r"
    assert frames(raw) == ["  0%|  | 0/3 [00:00<?, ?it/s]",
                           "Capturing batches (bs=4):  33%|###  | 1/3 [00:00<00:00,  4.86it/s]"]


def test_ansi_and_control_characters_are_removed() -> None:
    raw = "\x1b[1;36m(VllmWorkerProcess pid=67)\x1b[0;0m INFO x\x07y\x08 \x1b]0;title\x07done\x1b"
    assert frames(raw) == ["(VllmWorkerProcess pid=67) INFO xy done"]


def test_markup_like_text_is_kept_literally() -> None:
    assert frames("[bold]x[/] [/usr/bin/python3]") == ["[bold]x[/] [/usr/bin/python3]"]


def test_a_bar_glued_to_the_next_line_is_split() -> None:
    raw = ("  0%|          | 0/13 [00:00<?, ?it/s][2025-03-08 12:29:21 TP1] Capture cuda graph begin.")
    assert frames(raw) == ["  0%|          | 0/13 [00:00<?, ?it/s]",
                           "[2025-03-08 12:29:21 TP1] Capture cuda graph begin."]


def test_overlong_lines_are_cut_and_marked() -> None:
    (text,) = frames("x" * (MAX_LINE_CHARS + 10))
    assert text.endswith("…[cut 10 chars]") and len(text) < MAX_LINE_CHARS + 32


@pytest.mark.parametrize("raw, msg, stamp, rank, ident", [
    # SGLang with ranks, and without
    ("[2025-03-08 12:29:11 TP3] Init torch distributed begin.", "Init torch distributed begin.",
     (2025, 3, 8, "12:29:11"), "TP3", None),
    ("[2025-06-26 09:47:18 DP0 TP0] Capture cuda graph bs [2, 4]", "Capture cuda graph bs [2, 4]",
     (2025, 6, 26, "09:47:18"), "DP0 TP0", None),
    # vLLM V1 with a worker prefix, V0 without brackets
    ("(VllmWorkerProcess pid=67) INFO 11-05 03:21:41 model_runner.py:1025] Loading model weights took 10 GB",
     "Loading model weights took 10 GB", (None, 11, 5, "03:21:41"), "DP0/pid67", None),
    ("(EngineCore_DP0 pid=12321) INFO 02-12 19:35:05 [gpu_model_runner.py:4033] Starting to load model x...",
     "Starting to load model x...", (None, 2, 12, "19:35:05"), "DP0/core", None),
    ("(Worker_TP1 pid=5) INFO 02-12 19:35:05 [default_loader.py:291] Loading weights took 2.70 seconds",
     "Loading weights took 2.70 seconds", (None, 2, 12, "19:35:05"), "DP0/Worker_TP1", None),
    ("(Worker_DP1_TP0 pid=5) INFO 02-12 19:35:05 [default_loader.py:291] Loading weights took 2.70 seconds",
     "Loading weights took 2.70 seconds", (None, 2, 12, "19:35:05"), "DP1/Worker_DP1_TP0", None),
    ("(EngineCore_DP3 pid=7) INFO 02-12 19:35:05 [core.py:1] x", "x", (None, 2, 12, "19:35:05"), "DP3/core", None),
    # syslog, with grep -n in front; journalctl -o short-iso
    ("109:Feb 26 17:41:39 gpu-node-1 python3.12[409441]: (EngineCore_DP0 pid=409441) ValueError: boom",
     "ValueError: boom", (None, 2, 26, "17:41:39"), "DP0/core", "python3.12"),
    ("2026-11-29T16:27:20+0000 gpu-node-1 systemd[1]: Started sglang.service.", "Started sglang.service.",
     (2026, 11, 29, "16:27:20"), None, "systemd"),
    # docker compose, a log viewer's gutter, a container runtime's timestamp before SGLang's own
    ("sglang-1  | [2025-05-02 16:13:41] Init torch distributed begin.", "Init torch distributed begin.",
     (2025, 5, 2, "16:13:41"), None, None),
    ("  | ERROR 07-01 13:54:43 multiproc_worker_utils.py:120] Worker died", "Worker died",
     (None, 7, 1, "13:54:43"), None, None),
    ("2026-09-22T06:49:56.336833841Z [2026-09-22 06:49:57] server_args=ServerArgs(", "server_args=ServerArgs(",
     (2026, 9, 22, "06:49:56"), None, None),
    # torch's [rankN]: prefix, glog, Python logging, TRT-LLM, TGI, Ollama's logfmt
    ("[rank1]: torch.cuda.OutOfMemoryError: CUDA out of memory.", "torch.cuda.OutOfMemoryError: CUDA out of memory.",
     None, "rank1", None),
    ("W0904 14:28:17.324000 964632 torch/utils/cpp_extension.py:2425] TORCH_CUDA_ARCH_LIST is not set",
     "TORCH_CUDA_ARCH_LIST is not set", (None, 9, 4, "14:28:17"), None, None),
    ("2025-05-02 16:14:33,560 - INFO - flashinfer.jit: Prebuilt kernels not found",
     "flashinfer.jit: Prebuilt kernels not found", (2025, 5, 2, "16:14:33"), None, None),
    ("[12/20/2025-04:20:04] [TRT-LLM] [I] Using LLM with PyTorch backend", "Using LLM with PyTorch backend",
     (2025, 12, 20, "04:20:04"), None, None),
    ("2024-06-17T13:18:04.047265Z  INFO shard-manager: text_generation_launcher: Waiting for shard",
     "shard-manager: text_generation_launcher: Waiting for shard", (2024, 6, 17, "13:18:04"), None, None),
    ('time=2024-11-02T10:00:00.000Z level=INFO source=routes.go:1 msg="Listening on 127.0.0.1:11434"',
     'source=routes.go:1 msg="Listening on 127.0.0.1:11434"', (2024, 11, 2, "10:00:00"), None, None),
])
def test_prefixes(raw, msg, stamp, rank, ident) -> None:
    line = parse(7, raw)
    assert line.msg == msg
    assert line.text == raw and line.lineno == 7
    got = None if line.stamp is None else (line.stamp.year, line.stamp.month, line.stamp.day, line.stamp.hms)
    assert got == stamp
    assert line.rank == rank
    assert line.ident == ident


@pytest.mark.parametrize("raw, level, msg", [
    ("INFO:     Started server process [23347]", "INFO", "Started server process [23347]"),  # uvicorn
    ("WARNING:  Invalid HTTP request received.", "WARNING", "Invalid HTTP request received."),
    ("ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address already in use",
     "ERROR", "[Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address already in use"),
    ("WARNING: Running pip as the 'root' user", "WARNING", "Running pip as the 'root' user"),  # pip
    ("INFO:tgi-server:        + Starting Docker client", "INFO", "+ Starting Docker client"),  # logging's default
    ("vllm-1  | INFO:     Application startup complete.", "INFO", "Application startup complete."),
])
def test_a_level_alone_before_the_message_is_its_level(raw, level, msg) -> None:
    line = parse(1, raw)
    assert (line.level, line.msg, line.prefixed) == (level, msg, True)


def test_a_word_and_a_colon_that_are_no_level_stay_in_the_message() -> None:
    for raw in ("INFO:", "ERROR:x", "Error: boom", "WARNINGS: 3"):
        line = parse(1, raw)
        assert (line.level, line.msg) == (None, raw), raw


def test_unprefixed_continuation_lines_are_not_new_messages() -> None:
    assert parse(1, "[2025-03-08 12:29:11 TP3] Scheduler hit an exception:").prefixed
    assert not parse(2, '  File "/x/scheduler.py", line 3, in run').prefixed
    assert not parse(3, "KeyError: 'BLOCK_SIZE_M'").prefixed
    assert not parse(4, "(EngineCore_DP0 pid=1)   warnings.warn(").prefixed


def test_text_that_only_looks_like_a_prefix_stays_in_the_message() -> None:
    for raw in ("12:34:56 something", "# GPU blocks: 2358, # CPU blocks: 2048", "slot init: id  0 | task -1 |",
                "(sglang) user@gpu-node-1:~$ python -m sglang.launch_server"):
        assert parse(1, raw).msg == raw


def test_grep_context_lines_lose_their_number_too() -> None:
    line = parse(1, "1234-[2025-03-08 12:29:11 TP0] Load weight begin.")
    assert (line.msg, line.rank) == ("Load weight begin.", "TP0")


@pytest.mark.parametrize("head, shaped", [
    ("2025-03-08 12:29:11 INFO x", True), ("2025-03-08T12:29:11Z", True), ("0000-00-00", True),
    ("12:2025-03-08 x", False), ("1234:foo", False), ("1234-[2025-03-08 12:29:11 TP0]", False),
    ("12-31 23:59:58", False), ("2025-0", False), ("", False), ("-2025-03-08", False),
])
def test_date_shape_is_one_test_for_text_and_bytes(head: str, shaped: bool) -> None:
    # The one look "does this line begin like YYYY-MM-DD" that parse(), the quiet path and the
    # block scan share: the same answer on a line's text and on its bytes.
    assert date_shaped(head) is shaped
    assert date_shaped_bytes(head.encode()) is shaped


def test_a_date_led_line_keeps_its_year_but_a_grep_n_number_goes() -> None:
    dated = parse(1, "2025-03-08 12:29:11 INFO Load weight begin.")
    grepped = parse(1, "12:2025-03-08 12:29:11 INFO Load weight begin.")
    assert (dated.stamp, dated.numbered) == (grepped.stamp, False)
    assert dated.stamp is not None and dated.stamp.year == 2025
    assert grepped.numbered and grepped.msg == dated.msg


def test_tabs_read_the_same_through_bytes_and_text() -> None:
    from probes.logs.reader import StartupReader

    a, b = StartupReader(), StartupReader()
    a.feed_bytes(b"KeyError:\t'BLOCK_SIZE_M'")
    b.feed("KeyError:\t'BLOCK_SIZE_M'")
    assert a.reading(ended=True) == b.reading(ended=True)
    assert a.reading(ended=True).error.text == "KeyError:    'BLOCK_SIZE_M'"
