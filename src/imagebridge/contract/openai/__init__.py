"""OpenAI's wire dialect: the shapes OpenAI's SDKs send and decode, and their mapping.

The OpenAI-compatible surface is a translation. OpenAI's request shapes map onto the native
:class:`~imagebridge.contract.request.ImageRequest`, and the native response and events map
back, here (and, where the mapping needs I/O or the running bridge, in
:mod:`imagebridge.server.openai`); the engine never learns the dialect. Only the server surface
and the standalone client import this package: a ``lint-imports`` contract in pyproject.toml
holds everything below the surface to that.

- ``fields.py``: one decision per OpenAI image field (passed on, mapped, ignored, refused),
  shared by every route that takes them.
- ``images.py``: the Images API: the generation request, ``ImagesResponse`` and its usage,
  and the projection of a native response onto it.
- ``images_stream.py``: the Images API's stream events.
- ``models.py``: ``GET /v1/models``.

Another OpenAI surface (the Responses API) adds its own modules beside these
(``responses.py``, ``responses_stream.py``), taking its image tool's fields through
``fields.py``.
"""
