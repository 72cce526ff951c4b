"""Actions on a host's unit (restart, stop, kill) and the safe restart's wait for the GPUs.
"""
