"""Placeholder until ``upwatch status`` lands (being written separately); the real module replaces this file."""


def run_status(config, *, as_json, timeout_s, out):
    raise NotImplementedError
