"""``python -m dcop`` is the ``dcop`` command."""

from dcop.cli import main

main()
