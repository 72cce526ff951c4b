"""``python -m tui`` runs the ``upwatch`` command."""

from tui.cli import main

raise SystemExit(main())
