"""Textual widgets that render a host's state. They do no I/O and no parsing (see DESIGN.md).

Empty until the dashboard lands; kept so the package layout and the import contracts hold now.
"""
