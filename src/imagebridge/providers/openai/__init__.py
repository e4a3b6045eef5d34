"""OpenAI Images over HTTP: the ``openai`` provider and ``[providers.openai_compatible.*]``.

:mod:`.images` is the provider (generations and edits, streaming, fan-out hints),
:mod:`.wire` the request bodies and response parsing, :mod:`.models` what each model
supports.
"""
