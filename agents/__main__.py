"""``python -m dcop.agents`` is ``dcop-agent``."""

from dcop.agents.cli import main

main()
