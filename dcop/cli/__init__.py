"""Command line: ``dcop <command>``. Each command module registers its commands on
:data:`dcop.cli.app.app`; :mod:`dcop.cli.entry` is the entry point, which decides from the
command's name what to import and what to start first. Importing this package does nothing.
"""
