"""The bridge's own ChatGPT logins: sign-in (:mod:`.flows`: device code, browser PKCE),
storage in codex's ``auth.json`` shape (:mod:`.store`) and safe refresh (:mod:`.refresh`).

The package itself imports nothing; account names follow :mod:`imagebridge.contract.accounts`.
"""
