"""``python -m copapy`` is the ``copapy`` command, for environments without the script on PATH."""

from .cli import main

raise SystemExit(main())
