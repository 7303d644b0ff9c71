"""``python -m dcop`` is the ``dcop`` command."""

from dcop.cli.entry import main

main()
