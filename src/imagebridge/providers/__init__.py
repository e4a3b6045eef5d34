"""The upstream transports behind the engine's ``Provider`` port, one package per family.

``mock`` (:mod:`.mock`, offline, deterministic), Codex over HTTP (:mod:`.codex`), the
``codex app-server`` child process (:mod:`.codex_app_server`) and OpenAI Images
(:mod:`.openai`). What the families share is :mod:`.shared` (capability pieces, upstream
text) and :mod:`.sse` (the SSE decoder). Providers never read configuration: application/
builds them from plain settings.
"""
