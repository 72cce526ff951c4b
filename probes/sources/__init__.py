"""The probes: for each thing upwatch reads on a host (unit, journal, GPUs, health, download), the
command it runs and the parser of its answer.
"""
