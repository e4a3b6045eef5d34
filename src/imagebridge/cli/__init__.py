"""The ``imagegen-bridge`` command line (alias ``imagebridge``); see docs/cli.md.

:mod:`.app` assembles the typer application from :mod:`.commands` (signatures only, so
``--help`` stays fast); each command's body imports its work lazily from the modules here
and from :mod:`.generation` (``generate`` / ``edit``).
"""
