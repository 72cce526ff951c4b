"""Reading a server's log: line cleaning, prefixes and decoders, the engines' rules and the
startup reader. Pure: a line in, a :class:`~probes.data.reading.Reading` out.
"""
