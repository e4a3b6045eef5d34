"""Codex over HTTP: the ``codex-responses`` and ``codex-images`` transports.

Both use a person's ChatGPT login (:mod:`.auth`, own logins in :mod:`.login`) against the
Codex backend: :mod:`.responses` streams the Responses API with the hosted image tool,
:mod:`.images` calls the dedicated image routes. Both are a :class:`~.base.CodexHttpProvider`,
which runs each call on the pool's accounts (:mod:`.account_failover`), guarded by the
deadline and cancellation (:mod:`.guarded_call`, the retry in :mod:`.retries`), feeds the
quota readings (:mod:`.quota_readings`, one account's in :mod:`.quota`) and checks the answer
(:mod:`.answer`); :mod:`.http` is the shared HTTP client and :mod:`.wire` the pure request and
response formats. :mod:`.pool` is the account pool every Codex transport (the app-server one
too) draws its calls from.
"""
