"""The watcher: one per host, it starts the probes' loops over a runner and feeds the model.
"""
