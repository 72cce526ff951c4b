"""Wiring: the command line, and later the dashboard app, its screens and actions."""
