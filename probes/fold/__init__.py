"""The pure fold: events into :class:`~probes.data.state.HostState`, the verdict, the ETA and the
notices. No asyncio, no I/O.
"""
