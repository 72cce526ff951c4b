"""What upwatch keeps on this machine: the data folder, the start history (SQLite) and the audit log.
"""
