"""Codex over HTTP: the ``codex-responses`` and ``codex-images`` transports.

Both use a person's ChatGPT login (:mod:`.auth`, own logins in :mod:`.login`) against the
Codex backend: :mod:`.responses` streams the Responses API with the hosted image tool,
:mod:`.images` calls the dedicated image routes. :mod:`.transport` holds what the two
share (HTTP client, retries in :mod:`.retries`, quota readings in :mod:`.quota`), and
:mod:`.wire` the pure request and response formats. :mod:`.pool` is the account pool
every Codex transport (the app-server one too) draws its calls from.
"""
