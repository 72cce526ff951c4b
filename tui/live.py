"""Placeholder until the live dashboard lands (being written separately); the real module replaces this file."""


def make_live_app(config):
    raise NotImplementedError
