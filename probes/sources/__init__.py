"""The probes: for each thing upwatch reads on a host (unit, journal, GPUs and their processes,
health, download), the command it runs, the parser of its answer and the loop that runs it on a
:class:`~probes.sources.context.SourceContext` (unit, journal, gpu + nvml + gpu_apps + gpu_errors,
health, download; logfile reads a saved log).
"""
