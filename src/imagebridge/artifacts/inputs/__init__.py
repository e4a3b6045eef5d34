"""Loading caller inputs into verified image bytes: the engine's input port.

:mod:`.loader` (:class:`~.loader.InputLoader`: local files confined to the configured
roots, inline base64 and data URLs), :mod:`.remote` (remote URLs through the SSRF rules)
and :mod:`.inline` (the CLI's and MCP server's local files sent inline).
"""
