"""The OpenAI-compatible HTTP surface: OpenAI's routes, run like the native ones.

Each route decodes OpenAI's request (the shapes in :mod:`imagebridge.contract.openai`), maps
it to a native ``ImageRequest``, runs it through the same execution as ``/v1/images``
(:mod:`imagebridge.server.execution`) and translates the answer, stream or error back.

- ``images.py``: ``POST /v1/images/generations`` (JSON) and ``/v1/images/edits``
  (multipart).
- ``models.py``: ``GET /v1/models`` and ``/v1/models/{model}``.
- ``model_names.py``: which provider and model serve a name an OpenAI client sends.
- ``multipart.py``: the edits route's form, parsed as it streams, mapped to the request.
- ``images_stream.py``: ``stream: true``, OpenAI's dialect of the one SSE lifecycle.
- ``errors.py``: native field paths in an error renamed to the OpenAI ``param``.
- ``openapi.py``: its part of the OpenAPI document (the edit form, the ``Compatible*`` names).

Another OpenAI surface (the Responses API) adds its route modules here and is mounted in
``server/app.py`` beside these routers. Nothing below the server imports this package
(a ``lint-imports`` contract in pyproject.toml).
"""
