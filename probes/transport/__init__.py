"""How commands reach a host: the :class:`~probes.transport.runner.Runner` protocol and its
implementations (OpenSSH-compatible asyncssh, this machine, and the replayed demo hosts).
"""
