"""Errors on the OpenAI-compatible routes: the native field path renamed to OpenAI's ``param``.

OpenAI's clients read the envelope's ``param`` as one of their own request fields
(``n``, ``model``, ``image``); the engine names native paths (``parameters.n``,
``routing.model``, ``images[0]``). Every OpenAI route passes its errors through
:func:`openai_error` (the JSON answers and the streams alike), so both speak the same names.
"""

from __future__ import annotations

from collections.abc import Callable

from imagebridge.contract.errors import BridgeError
from imagebridge.contract.openai.fields import openai_param
from imagebridge.server.errors import HttpError

__all__ = ["openai_error"]


def _first_issue_field(error: BridgeError) -> str | None:
    issues = error.details.get("issues")
    if isinstance(issues, list) and issues and isinstance(issues[0], dict):
        field = issues[0].get("field")
        return field if isinstance(field, str) else None
    return None


def openai_error(
    error: BridgeError, rename: Callable[[str | None], str | None] = openai_param
) -> BridgeError:
    """The error with ``details.field`` (the envelope's ``param``) as an OpenAI field name.

    A validation failure listing ``details.issues`` (``param`` null on the native routes,
    the original's rule) names its first issue's field here: OpenAI clients read ``param``.
    ``rename`` maps a native path to the surface's field (the Images API's by default; the
    Responses API passes its request's own map).
    """
    native = error.field or _first_issue_field(error)
    param = rename(native)
    if param == error.field or isinstance(error, HttpError):
        return error
    renamed = error.copy()
    renamed.details["field"] = param
    return renamed
