"""The bridge's own ChatGPT logins: sign-in (:mod:`.flows`: device code, browser PKCE),
storage in codex's ``auth.json`` shape (:mod:`.store`) and safe refresh (:mod:`.refresh`).

The package itself imports nothing, so the config validator can use :mod:`.names`
without loading HTTP code.
"""
