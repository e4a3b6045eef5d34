"""OpenAI's ``Response`` object for image work, as the SDKs decode it strictly.

A finished image is one ``image_generation_call`` item (the image in ``result``, base64,
with the effective ``size``, ``quality``, ``output_format``, ``background`` and the
``action``) followed by one assistant message, the bridge's own short sentence
(:func:`assistant_text`): agent frameworks end a turn on an assistant message, and the
Agents SDK would otherwise call the model again. ``usage`` is the provider's count,
``tool_usage.image_gen`` the image's (:func:`~imagebridge.contract.openai.images.compat_usage`).

What only the bridge has (provider, model, effective parameters, normalizations,
warnings, timings; the native error of a failed response) is in a top-level
``imagegen_bridge`` object, where the SDKs' decoders do not look, as on the Images API.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pydantic import Field

from imagebridge.contract._base import U64, ContractModel, StrictBool, StrictStr, omit_none
from imagebridge.contract.enums import Background, Operation, Quality
from imagebridge.contract.errors import ERROR_TABLE, BridgeError, ErrorCode
from imagebridge.contract.openai.images import (
    CompatResponseExtension,
    CompatUsage,
    compat_response,
    compat_usage,
)
from imagebridge.contract.openai.responses import ResponsesTranslation, rename_param
from imagebridge.contract.request import GenerationParameters
from imagebridge.contract.response import (
    BridgeErrorBody,
    ImageResponse,
    Normalization,
    SessionMetadata,
    Timings,
)

__all__ = [
    "ImageGenerationCallItem",
    "OutputMessage",
    "OutputText",
    "ResponseIds",
    "ResponseObject",
    "ResponseShape",
    "ResponseStatus",
    "assistant_text",
    "failed_response",
    "finished_response",
    "pending_response",
    "response_error_code",
    "response_shape",
]

ResponseStatus = Literal["completed", "failed", "in_progress", "cancelled", "queued", "incomplete"]
CallStatus = Literal["in_progress", "completed", "generating", "failed"]


class OutputText(ContractModel):
    type: Literal["output_text"] = "output_text"
    text: StrictStr
    annotations: list[Any] = Field(default_factory=list)
    logprobs: list[Any] = Field(default_factory=list)


class OutputMessage(ContractModel):
    """The assistant message that ends a turn."""

    id: StrictStr
    type: Literal["message"] = "message"
    role: Literal["assistant"] = "assistant"
    status: Literal["in_progress", "completed", "incomplete"]
    content: list[OutputText]


class ImageGenerationCallItem(ContractModel):
    """One ``image_generation_call``: ``result`` is the image (base64) once completed."""

    id: StrictStr
    type: Literal["image_generation_call"] = "image_generation_call"
    status: CallStatus
    result: StrictStr | None = None
    action: Literal["generate", "edit", "auto"] | None = Field(default=None, exclude_if=omit_none)
    background: Literal["transparent", "opaque", "auto"] | None = Field(
        default=None, exclude_if=omit_none
    )
    output_format: Literal["png", "webp", "jpeg"] | None = Field(default=None, exclude_if=omit_none)
    quality: Literal["low", "medium", "high", "auto"] | None = Field(
        default=None, exclude_if=omit_none
    )
    revised_prompt: StrictStr | None = Field(default=None, exclude_if=omit_none)
    size: StrictStr | None = Field(default=None, exclude_if=omit_none)


OutputItem = ImageGenerationCallItem | OutputMessage


class InputTokensDetails(ContractModel):
    cached_tokens: U64 = 0
    cache_write_tokens: U64 = 0


class OutputTokensDetails(ContractModel):
    reasoning_tokens: U64 = 0


class ResponseUsage(ContractModel):
    input_tokens: U64
    input_tokens_details: InputTokensDetails = Field(default_factory=InputTokensDetails)
    output_tokens: U64
    output_tokens_details: OutputTokensDetails = Field(default_factory=OutputTokensDetails)
    total_tokens: U64


class WebSearchUsage(ContractModel):
    num_requests: U64 = 0


class ToolUsage(ContractModel):
    """``tool_usage``: the image tool's tokens (web search is never used: 0)."""

    image_gen: CompatUsage
    web_search: WebSearchUsage = Field(default_factory=WebSearchUsage)


ResponseErrorCode = Literal[
    "server_error",
    "rate_limit_exceeded",
    "invalid_image",
    "image_content_policy_violation",
]


class ResponseError(ContractModel):
    """``error`` of a failed response: OpenAI's closed ``code`` set, the native error's
    OpenAI ``type`` and ``param`` (the native code is in ``imagegen_bridge.error``)."""

    code: ResponseErrorCode
    message: StrictStr
    type: StrictStr | None = None
    param: StrictStr | None = None


class IncompleteDetails(ContractModel):
    reason: Literal["max_output_tokens", "content_filter"] | None = None


class ResponseExtension(ContractModel):
    """``imagegen_bridge`` of a Responses answer: the Images API's extension for a finished
    image, and the native error of a failed one (each key present when known)."""

    id: StrictStr | None = Field(default=None, exclude_if=omit_none)
    provider: StrictStr | None = Field(default=None, exclude_if=omit_none)
    model: StrictStr | None = Field(default=None, exclude_if=omit_none)
    effective: GenerationParameters | None = Field(default=None, exclude_if=omit_none)
    normalizations: list[Normalization] = Field(default_factory=list)
    session: SessionMetadata | None = Field(default=None, exclude_if=omit_none)
    timings: Timings | None = Field(default=None, exclude_if=omit_none)
    warnings: list[StrictStr] = Field(default_factory=list)
    error: BridgeErrorBody | None = Field(default=None, exclude_if=omit_none)


class TextFormat(ContractModel):
    type: Literal["text"] = "text"


class TextSettings(ContractModel):
    format: TextFormat = Field(default_factory=TextFormat)


class ResponseObject(ContractModel):
    """OpenAI's ``Response`` (keys as OpenAI sends them, nulls included) + ``imagegen_bridge``."""

    id: StrictStr
    object: Literal["response"] = "response"
    created_at: U64
    status: ResponseStatus
    background: StrictBool = False
    completed_at: U64 | None = None
    error: ResponseError | None = None
    incomplete_details: IncompleteDetails | None = None
    instructions: StrictStr | None = None
    max_output_tokens: U64 | None = None
    max_tool_calls: U64 | None = None
    metadata: dict[str, StrictStr] = Field(default_factory=dict)
    model: StrictStr
    output: list[OutputItem] = Field(default_factory=list)
    parallel_tool_calls: StrictBool = True
    previous_response_id: StrictStr | None = None
    prompt_cache_key: StrictStr | None = None
    reasoning: dict[str, Any] | None = None
    safety_identifier: StrictStr | None = None
    service_tier: Literal["default"] = "default"
    temperature: float | None = None
    text: TextSettings = Field(default_factory=TextSettings)
    tool_choice: StrictStr | dict[str, Any] = "auto"
    tools: list[dict[str, Any]] = Field(default_factory=list)
    top_logprobs: U64 | None = None
    top_p: float | None = None
    truncation: Literal["auto", "disabled"] = "disabled"
    usage: ResponseUsage | None = None
    tool_usage: ToolUsage | None = Field(default=None, exclude_if=omit_none)
    user: StrictStr | None = None
    imagegen_bridge: ResponseExtension = Field(default_factory=ResponseExtension)


@dataclass(frozen=True, slots=True)
class ResponseIds:
    """The ids one response is known by (its own, its two output items') and its birth."""

    response: str
    call: str
    message: str
    created_at: int


Action = Literal["generate", "edit", "auto"]


@dataclass(frozen=True, slots=True)
class ResponseShape:
    """What a response repeats of its request and reports of its translation: all an answer
    needs besides its ids and its outcome, so a kept response is rebuilt from this and its
    history record (:meth:`to_json` is what the response store keeps)."""

    echo: dict[str, Any]
    """The request's values every answer repeats (not ``id``, ``created_at``, ``model``)."""
    model: str | None
    """The ``model`` the client sent (``None``: the answer names what served it)."""
    action: Action
    operation: Operation
    preview: dict[str, str]
    """``size``, ``quality``, ``background``, ``output_format`` a partial image repeats."""
    warnings: tuple[str, ...] = ()
    normalizations: tuple[Normalization, ...] = ()
    background: bool = False
    previous_response_id: str | None = None
    served_model: str | None = field(default=None, compare=False)
    """What served it when the client named no ``model`` (known once routed)."""
    tool_param: str = "tools[0]"
    params: dict[str, str] = field(default_factory=dict)
    """Native field path → the request path it came from (:meth:`param`)."""
    conversation: str | None = None
    """The persistent session key the response ran under on a provider that keeps
    threads (``None``: it ran isolated); a follow-up naming it continues that session."""

    def param(self, native: str | None) -> str | None:
        """The request field a native error's field names (as the translation names it)."""
        return rename_param(self.params, self.tool_param, native)

    def answer_model(self, fallback: str) -> str:
        return self.model or self.served_model or fallback

    def with_normalizations(self, first: list[Normalization]) -> ResponseShape:
        """The shape with ``first`` reported before the translation's own."""
        return replace(self, normalizations=(*first, *self.normalizations))

    def to_json(self) -> str:
        return json.dumps(
            {
                "echo": self.echo,
                "model": self.model,
                "action": self.action,
                "operation": self.operation.value,
                "preview": self.preview,
                "warnings": list(self.warnings),
                "normalizations": [n.model_dump(mode="json") for n in self.normalizations],
                "background": self.background,
                "previous_response_id": self.previous_response_id,
                "served_model": self.served_model,
                "tool_param": self.tool_param,
                "params": self.params,
                "conversation": self.conversation,
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> ResponseShape:
        data = json.loads(text)
        return cls(
            echo=dict(data["echo"]),
            model=data["model"],
            action=data["action"],
            operation=Operation(data["operation"]),
            preview=dict(data["preview"]),
            warnings=tuple(data["warnings"]),
            normalizations=tuple(Normalization.model_validate(n) for n in data["normalizations"]),
            background=bool(data["background"]),
            previous_response_id=data.get("previous_response_id"),
            served_model=data.get("served_model"),
            tool_param=data.get("tool_param", "tools[0]"),
            params=dict(data.get("params", {})),
            conversation=data.get("conversation"),
        )


def response_shape(translation: ResponsesTranslation) -> ResponseShape:
    """The shape of the response a translated request gets."""
    body = translation.body
    parameters = translation.request.parameters
    action = translation.tool.action
    return ResponseShape(
        echo={
            "instructions": body.instructions,
            "max_output_tokens": body.max_output_tokens,
            "max_tool_calls": body.max_tool_calls,
            "metadata": dict(body.metadata or {}),
            "parallel_tool_calls": body.parallel_tool_calls is not False,
            "prompt_cache_key": body.prompt_cache_key,
            "safety_identifier": body.safety_identifier,
            "temperature": body.temperature,
            "tool_choice": translation.echoed_tool_choice(),
            "tools": translation.echoed_tools(),
            "top_logprobs": body.top_logprobs,
            "top_p": body.top_p,
            "truncation": body.truncation or "disabled",
            "user": body.user,
        },
        model=body.model,
        action="auto" if action is None else action.value,
        operation=translation.request.operation,
        preview={
            "size": parameters.size,
            "quality": parameters.quality.value,
            "background": parameters.background.value,
            "output_format": parameters.output_format.value,
        },
        warnings=tuple(translation.warnings),
        normalizations=tuple(translation.normalizations),
        background=bool(body.background),
        previous_response_id=body.previous_response_id,
        tool_param=translation.tool_param,
        params=dict(translation.params),
    )


def _echo(shape: ResponseShape, ids: ResponseIds, model: str) -> dict[str, Any]:
    """The request's values an answer repeats, as OpenAI repeats them."""
    return {
        **shape.echo,
        "id": ids.response,
        "created_at": ids.created_at,
        "model": shape.answer_model(model),
        "background": shape.background,
        "previous_response_id": shape.previous_response_id,
    }


def pending_response(
    shape: ResponseShape,
    ids: ResponseIds,
    *,
    model: str,
    status: Literal["in_progress", "queued"] = "in_progress",
) -> ResponseObject:
    """The response before its image exists (``response.created``, ``in_progress``; a
    background response is ``queued`` until its job runs)."""
    return ResponseObject(
        **_echo(shape, ids, model),
        status=status,
        imagegen_bridge=ResponseExtension(warnings=list(shape.warnings)),
    )


def pending_call(shape: ResponseShape, ids: ResponseIds) -> ImageGenerationCallItem:
    return ImageGenerationCallItem(id=ids.call, status="in_progress", action=shape.action)


_BACKGROUNDS: dict[Background, Literal["transparent", "opaque"]] = {
    Background.TRANSPARENT: "transparent",
    Background.OPAQUE: "opaque",
}
_QUALITIES: dict[Quality, Literal["low", "medium", "high", "auto"]] = {
    Quality.LOW: "low",
    Quality.MEDIUM: "medium",
    Quality.HIGH: "high",
    Quality.AUTO: "auto",
}


def assistant_text(operation: Operation, response: ImageResponse) -> str:
    """The assistant message of a finished image: what was made, never the prompt."""
    image = response.data[0]
    verb = "Edited the image" if operation is Operation.EDIT else "Generated an image"
    return f"{verb}: {image.width}x{image.height} {image.format.value}."


def _extension(
    answer: CompatResponseExtension, shape: ResponseShape, route: list[Normalization]
) -> ResponseExtension:
    normalizations = [*route, *shape.normalizations, *answer.normalizations]
    warnings = list(shape.warnings)
    warnings.extend(warning for warning in answer.warnings if warning not in warnings)
    return ResponseExtension(
        id=answer.id,
        provider=answer.provider,
        model=answer.model,
        effective=answer.effective,
        normalizations=normalizations,
        session=answer.session,
        timings=answer.timings,
        warnings=warnings,
    )


def _usage(response: ImageResponse) -> tuple[ResponseUsage | None, ToolUsage | None]:
    image = compat_usage(response.usage)
    if image is None:
        return None, None
    native = response.usage
    assert native is not None
    inputs = native.input_tokens if native.input_tokens is not None else image.input_tokens
    outputs = native.output_tokens if native.output_tokens is not None else image.output_tokens
    total = native.total_tokens if native.total_tokens is not None else inputs + outputs
    usage = ResponseUsage(input_tokens=inputs, output_tokens=outputs, total_tokens=total)
    return usage, ToolUsage(image_gen=image)


def finished_call(
    shape: ResponseShape, ids: ResponseIds, response: ImageResponse
) -> ImageGenerationCallItem:
    image = response.data[0]
    effective = response.effective
    return ImageGenerationCallItem(
        id=ids.call,
        status="completed",
        result=image.b64_json,
        action=shape.action,
        background=_BACKGROUNDS.get(effective.background, "auto"),
        output_format=image.format.value,
        quality=_QUALITIES[effective.quality],
        revised_prompt=response.revised_prompt,
        size=f"{image.width}x{image.height}",
    )


def finished_message(
    shape: ResponseShape, ids: ResponseIds, response: ImageResponse
) -> OutputMessage:
    text = assistant_text(shape.operation, response)
    return OutputMessage(id=ids.message, status="completed", content=[OutputText(text=text)])


def finished_response(
    shape: ResponseShape,
    ids: ResponseIds,
    response: ImageResponse,
    *,
    completed_at: int,
    route: list[Normalization] | None = None,
) -> ResponseObject:
    """The completed response: the call item with the image, then the assistant message.

    ``route`` holds the server's model-routing normalization, reported first.
    """
    usage, tool_usage = _usage(response)
    return ResponseObject(
        **_echo(shape, ids, response.model),
        status="completed",
        completed_at=completed_at,
        output=[
            finished_call(shape, ids, response),
            finished_message(shape, ids, response),
        ],
        usage=usage,
        tool_usage=tool_usage,
        imagegen_bridge=_extension(compat_response(response).imagegen_bridge, shape, route or []),
    )


_ERROR_CODES: dict[ErrorCode, ResponseErrorCode] = {
    ErrorCode.SAFETY_REJECTED: "image_content_policy_violation",
    ErrorCode.RATE_LIMITED: "rate_limit_exceeded",
    ErrorCode.OVERLOADED: "rate_limit_exceeded",
    ErrorCode.INPUT: "invalid_image",
}


def response_error_code(error: BridgeError) -> ResponseErrorCode:
    """OpenAI's closed ``ResponseError.code`` for a native error (``server_error`` when
    none fits)."""
    return _ERROR_CODES.get(error.code, "server_error")


def failed_response(
    shape: ResponseShape,
    ids: ResponseIds,
    error: BridgeError,
    *,
    model: str,
    param: str | None,
    completed_at: int,
    status: Literal["failed", "cancelled"] = "failed",
) -> ResponseObject:
    """A failed response: ``error`` in OpenAI's terms, the native error in the extension,
    and the call item ``failed``. A cancelled background response is ``cancelled``, with
    no ``error`` (as at OpenAI) and the native error in the extension."""
    native = BridgeErrorBody.model_validate(error.to_dict())
    return ResponseObject(
        **_echo(shape, ids, model),
        status=status,
        completed_at=completed_at,
        error=None
        if status == "cancelled"
        else ResponseError(
            code=response_error_code(error),
            message=error.message,
            type=ERROR_TABLE[error.code].openai_type,
            param=param,
        ),
        output=[ImageGenerationCallItem(id=ids.call, status="failed", action=shape.action)],
        imagegen_bridge=ResponseExtension(warnings=list(shape.warnings), error=native),
    )
