"""OpenAI's Responses API, request side: ``POST /v1/responses`` as image work.

A request holding the ``image_generation`` tool means "make an image from this input"
(docs/api-decisions.md, "Responses"): the bridge has no chat model that decides whether to
call the tool, so the tool is always called, once. Every field of the SDK's
``ResponseCreateParams`` is decided here, by name:

- served: ``input``, ``instructions``, ``model`` (recorded; routed by the server), ``tools``,
  ``tool_choice``, ``stream``, ``metadata``, ``safety_identifier`` / ``user``,
  ``parallel_tool_calls``, ``max_tool_calls``, ``max_output_tokens``, ``truncation``,
  ``store``, ``text`` (plain text), ``service_tier``, ``include``, ``background``,
  ``previous_response_id`` (the server resolves it to the earlier image and passes it in);
- accepted with no effect and a warning (:data:`IGNORED_FIELDS`);
- refused with a 400 naming them (:data:`REFUSED_FIELDS`).

The image tool's fields go through the Images API's table
(:func:`imagebridge.contract.openai.fields.translate`), so ``quality: "xhigh"``, ``gif`` or
``complexity`` mean the same on both surfaces; a refusal names ``tools[i].<field>``.
:class:`ResponsesTranslation` remembers which request path each native field came from, so
an error the engine raises names the caller's field (:meth:`ResponsesTranslation.param`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import Field, Strict, ValidationError

from imagebridge.contract._base import U8, U32, RequestModel, StrictBool, StrictStr
from imagebridge.contract.enums import (
    Background,
    CompatibilityMode,
    ImageAction,
    InputFidelity,
    Moderation,
    Operation,
)
from imagebridge.contract.errors import BridgeError
from imagebridge.contract.openai.fields import invalid, refuse, translate, validation_refusal
from imagebridge.contract.openai.images import OpenAIOutputFormat, OpenAIQuality
from imagebridge.contract.openai.responses_input import (
    FILE_IDS,
    ImageSource,
    image_input,
    read_input,
    within,
)
from imagebridge.contract.request import ImageRequest, ImageSize
from imagebridge.contract.response import Normalization

__all__ = [
    "IGNORED_FIELDS",
    "REFUSED_FIELDS",
    "ImageGenerationTool",
    "ResponsesBridgeExtension",
    "ResponsesCreateRequest",
    "ResponsesTranslation",
    "rename_param",
    "translate_request",
]

StrictFloat = Annotated[float, Strict()]
MAX_METADATA_PAIRS = 16
MAX_METADATA_KEY_CHARS = 64
MAX_METADATA_VALUE_CHARS = 512
"""OpenAI's own bounds on ``metadata`` (part of its contract, so not configuration)."""

IGNORED_FIELDS: dict[str, str] = {
    "temperature": "openai_temperature_ignored",
    "top_p": "openai_top_p_ignored",
    "top_logprobs": "openai_top_logprobs_ignored",
    "reasoning": "openai_reasoning_ignored",
    "moderation": "openai_response_moderation_ignored",
    "context_management": "openai_context_management_ignored",
    "image": "openai_image_options_ignored",
    "access_programs": "openai_access_programs_ignored",
    "prompt_cache_options": "openai_prompt_cache_ignored",
    "prompt_cache_retention": "openai_prompt_cache_ignored",
}
"""Fields with no effect on a bridge's answer: accepted, a warning says so. They tune a
chat model's sampling, reasoning or caching, and the bridge has no chat model (the
assistant message is the bridge's own sentence, see :func:`assistant_text`)."""

REFUSED_FIELDS: dict[str, str] = {
    "background_options": (
        "background_options is not served: a background response is polled, resumed or "
        "cancelled by its id"
    ),
    "conversation": "conversations are not kept by this bridge; send the history in input",
    "prompt": "saved prompt templates are not served by this bridge; send the text in input",
}
"""Fields asking for state or features the bridge has not: a 400 naming them."""

BACKGROUND_STORE = "a background response is kept until it is retrieved: it needs store: true"
NOT_IMAGE_TOOL = (
    "only the image_generation tool is served: this is an image bridge, not a model proxy"
)
ONE_IMAGE_TOOL = "one image_generation tool per request"
NO_IMAGE_TOOL = "an image_generation tool is required: this bridge only makes images"
TOOL_CHOICE = (
    "tool_choice must let the image_generation tool run (auto, required, or the "
    "image_generation tool): this bridge only makes images"
)
TEXT_FORMAT = "structured text output is not served: the bridge's only text is a fixed sentence"
NO_TOOL_CALLS = "max_tool_calls 0 allows no image_generation call"


class ImageMask(RequestModel):
    """The image tool's ``input_image_mask``."""

    image_url: StrictStr | None = None
    file_id: StrictStr | None = None


class ImageGenerationTool(RequestModel):
    """The SDK's ``ImageGeneration`` tool: every field it has (a new one fails a test)."""

    type: Literal["image_generation"]
    action: ImageAction | None = None
    background: Background | None = None
    complexity: Literal["low", "medium", "high"] | None = None
    frame_count: U32 | None = None
    frame_duration_ms: U32 | None = None
    input_fidelity: InputFidelity | None = None
    input_image_mask: ImageMask | None = None
    model: StrictStr | None = None
    moderation: Moderation | None = None
    output_compression: U8 | None = None
    output_format: OpenAIOutputFormat | None = None
    partial_images: U8 | None = None
    quality: OpenAIQuality | None = None
    size: ImageSize | None = None
    svg: dict[str, Any] | None = None


class ResponsesBridgeExtension(RequestModel):
    """``imagegen_bridge`` in a Responses request (``extra_body``): the native choices."""

    provider: StrictStr | None = None
    compatibility: CompatibilityMode | None = None


class ResponsesStreamOptions(RequestModel):
    include_obfuscation: StrictBool | None = None


class ResponsesTextConfig(RequestModel):
    format: dict[str, Any] | None = None
    verbosity: Literal["low", "medium", "high"] | None = None


class ResponsesCreateRequest(RequestModel):
    """``POST /v1/responses``: every field of the SDK's ``ResponseCreateParams``.

    Values the bridge only echoes are decoded loosely (JSON objects); the ones it acts on
    are typed, and :func:`translate_request` decides the rest by name.
    """

    input: StrictStr | list[Any] | None = None
    instructions: StrictStr | None = None
    model: StrictStr | None = None
    tools: list[Any] | None = None
    tool_choice: StrictStr | dict[str, Any] | None = None
    stream: StrictBool | None = None
    background: StrictBool | None = None
    background_options: dict[str, Any] | None = None
    conversation: StrictStr | dict[str, Any] | None = None
    previous_response_id: StrictStr | None = None
    prompt: dict[str, Any] | None = None
    include: list[StrictStr] | None = None
    max_output_tokens: U32 | None = None
    max_tool_calls: U32 | None = None
    metadata: dict[str, StrictStr] | None = None
    parallel_tool_calls: StrictBool | None = None
    safety_identifier: StrictStr | None = None
    user: StrictStr | None = None
    store: StrictBool | None = None
    stream_options: ResponsesStreamOptions | None = None
    temperature: StrictFloat | None = Field(default=None, ge=0, le=2)
    top_p: StrictFloat | None = Field(default=None, ge=0, le=1)
    top_logprobs: U8 | None = Field(default=None, le=20)
    truncation: Literal["auto", "disabled"] | None = None
    service_tier: (
        Literal["auto", "default", "flex", "scale", "priority", "fast", "ultrafast"] | None
    ) = None
    text: ResponsesTextConfig | None = None
    reasoning: dict[str, Any] | None = None
    prompt_cache_key: StrictStr | None = None
    prompt_cache_options: dict[str, Any] | None = None
    prompt_cache_retention: Literal["in_memory", "24h"] | None = None
    context_management: list[Any] | None = None
    image: dict[str, Any] | None = None
    moderation: dict[str, Any] | None = None
    access_programs: dict[str, Any] | None = None
    imagegen_bridge: ResponsesBridgeExtension | None = None


@dataclass(slots=True)
class ResponsesTranslation:
    """The native request a Responses body maps to, and what the answer repeats."""

    request: ImageRequest
    body: ResponsesCreateRequest
    tool: ImageGenerationTool
    tool_index: int
    params: dict[str, str] = field(default_factory=dict)
    """Native field path → the Responses request path it came from."""
    warnings: list[str] = field(default_factory=list)
    normalizations: list[Normalization] = field(default_factory=list)

    @property
    def tool_param(self) -> str:
        return f"tools[{self.tool_index}]"

    def param(self, native: str | None) -> str | None:
        """The Responses request field a native field path names (``images[0]`` →
        ``input[1].content[0].image_url``, ``parameters.size`` → ``tools[0].size``)."""
        return rename_param(self.params, self.tool_param, native)

    def echoed_tools(self) -> list[dict[str, Any]]:
        """The ``tools`` the answer repeats: the image tool as decoded (nulls left out)."""
        return [self.tool.model_dump(mode="json", exclude_none=True)]

    def echoed_tool_choice(self) -> str | dict[str, Any]:
        return self.body.tool_choice if self.body.tool_choice is not None else "auto"


def rename_param(params: Mapping[str, str], tool_param: str, native: str | None) -> str | None:
    """The request path a native field path came from (``params``' longest prefix, or the
    tool's field for a ``parameters.*`` path); the native path when neither names it."""
    if native is None:
        return None
    for prefix in sorted(params, key=len, reverse=True):
        if native == prefix or native.startswith((prefix + ".", prefix + "[")):
            return params[prefix] + native[len(prefix) :]
    if native.startswith("parameters."):
        return f"{tool_param}.{native.removeprefix('parameters.')}"
    return native


def _image_tool(tools: list[Any]) -> tuple[int, ImageGenerationTool]:
    found: tuple[int, ImageGenerationTool] | None = None
    for index, raw in enumerate(tools):
        param = f"tools[{index}]"
        kind = raw.get("type") if isinstance(raw, dict) else None
        if kind != "image_generation":
            raise refuse(param, NOT_IMAGE_TOOL)
        if found is not None:
            raise refuse(param, ONE_IMAGE_TOOL)
        try:
            found = (index, ImageGenerationTool.model_validate(raw))
        except ValidationError as exc:
            raise within(param, exc) from None
    if found is None:
        raise refuse("tools", NO_IMAGE_TOOL)
    return found


def _check_tool_choice(choice: str | dict[str, Any] | None) -> None:
    if choice is None or choice in ("auto", "required"):
        return
    if isinstance(choice, dict):
        kind = choice.get("type")
        if kind == "image_generation" and set(choice) == {"type"}:
            return
        if kind == "allowed_tools":
            tools = choice.get("tools")
            if (
                choice.get("mode") in ("auto", "required")
                and isinstance(tools, list)
                and {"type": "image_generation"} in tools
            ):
                return
    raise refuse("tool_choice", TOOL_CHOICE)


def _check_fields(body: ResponsesCreateRequest) -> list[str]:
    """Refuse what is refused; the warnings of the fields accepted with no effect."""
    if body.background and body.store is False:
        raise refuse("store", BACKGROUND_STORE)
    given = body.model_dump(exclude_none=True)
    for name, message in REFUSED_FIELDS.items():
        if name in given:
            raise refuse(name, message)
    if body.input is None:
        raise invalid("input", "input is required")
    _check_tool_choice(body.tool_choice)
    if body.max_tool_calls == 0:
        raise refuse("max_tool_calls", NO_TOOL_CALLS)
    text = body.text
    if text is not None and text.format is not None and text.format != {"type": "text"}:
        raise refuse("text.format", TEXT_FORMAT)
    if body.metadata is not None:
        _check_metadata(body.metadata)
    warnings = [warning for name, warning in IGNORED_FIELDS.items() if name in given]
    if text is not None and text.verbosity is not None:
        warnings.append("openai_text_verbosity_ignored")
    if body.service_tier not in (None, "auto", "default"):
        warnings.append("openai_service_tier_ignored")
    return list(dict.fromkeys(warnings))


def _check_metadata(metadata: dict[str, str]) -> None:
    if len(metadata) > MAX_METADATA_PAIRS:
        raise invalid("metadata", f"metadata holds at most {MAX_METADATA_PAIRS} pairs")
    for key, value in metadata.items():
        if len(key) > MAX_METADATA_KEY_CHARS or len(value) > MAX_METADATA_VALUE_CHARS:
            raise invalid(
                "metadata",
                f"metadata keys hold at most {MAX_METADATA_KEY_CHARS} characters and values "
                f"{MAX_METADATA_VALUE_CHARS}",
            )


def _prompt(body: ResponsesCreateRequest, texts: list[str], prompt: str) -> str:
    """The image prompt: the instructions (the request's, then system and developer
    messages'), then the last user message's text, each separated by a blank line."""
    parts = [body.instructions or "", *texts, prompt]
    return "\n\n".join(part for part in parts if part)


def _place_images(
    data: dict[str, Any],
    params: dict[str, str],
    action: ImageAction,
    images: list[ImageSource],
    earlier: ImageSource | None,
) -> None:
    """Which images the native request works on (docs/api-decisions.md, "Responses").

    The last user message's images are edited (``action`` ``auto``/``edit``) or, with
    ``action: "generate"``, guide a new image as references. Without images of its own, a
    follow-up edits the newest earlier ``image_generation_call`` result, unless the tool
    says ``generate``.
    """
    if not images and earlier is not None and action is not ImageAction.GENERATE:
        images = [earlier]
    if not images:
        return
    key = "reference_images" if action is ImageAction.GENERATE else "images"
    if key == "images":
        data["operation"] = Operation.EDIT
    data[key] = [source.image.model_dump(mode="json") for source in images]
    for index, source in enumerate(images):
        params[f"{key}[{index}]"] = source.param


def translate_request(
    body: ResponsesCreateRequest,
    *,
    previous: ImageSource | None = None,
    references: Mapping[str, ImageSource] | None = None,
) -> ResponsesTranslation:
    """Decide every field (refusals raise, naming the field) and map the request onto a
    native ``ImageRequest`` whose ``routing.model`` is the tool's ``model`` (the server
    routes it, or the top-level ``model`` when the tool names none).

    ``previous`` is the image of the response ``previous_response_id`` names, and
    ``references`` the images of the ``image_generation_call`` ids ``item_reference`` items
    name (the server reads them from the kept responses): the earliest history, then the
    input's items in order."""
    warnings = _check_fields(body)
    tool_index, tool = _image_tool(body.tools or [])
    tool_param = f"tools[{tool_index}]"
    identity = {"safety_identifier": body.safety_identifier, "user": body.user}
    try:
        fields = translate({**tool.model_dump(exclude={"type", "model", "action"}), **identity})
    except BridgeError as error:
        error.details["field"] = f"{tool_param}.{error.field}"
        raise
    assert body.input is not None
    read = read_input(body.input, references or {})
    if read.earlier is None:
        read.earlier = previous
    action = tool.action or ImageAction.AUTO
    params: dict[str, str] = {"prompt": "input"}
    ext = body.imagegen_bridge or ResponsesBridgeExtension()
    data: dict[str, Any] = {
        "prompt": _prompt(body, read.instructions, read.prompt),
        "operation": Operation.GENERATE,
        "parameters": {**fields.parameters, "action": action},
        "routing": {},
        "output": {"response_format": "b64_json"},
    }
    _place_images(data, params, action, read.images, read.earlier)
    mask = tool.input_image_mask
    if mask is not None:
        mask_param = f"{tool_param}.input_image_mask"
        if mask.file_id is not None:
            raise refuse(f"{mask_param}.file_id", FILE_IDS)
        if mask.image_url is None:
            raise invalid(f"{mask_param}.image_url", f"{mask_param}.image_url is required")
        data["mask"] = image_input(f"{mask_param}.image_url", mask.image_url).model_dump(
            mode="json"
        )
        params["mask"] = f"{mask_param}.image_url"
    if tool.model is not None:
        data["routing"]["model"] = tool.model
        params["routing.model"] = f"{tool_param}.model"
    else:
        params["routing.model"] = "model"
    if ext.provider is not None:
        data["routing"]["provider"] = ext.provider
        params["routing.provider"] = "imagegen_bridge.provider"
    if ext.compatibility is not None:
        data["policies"] = {"compatibility": ext.compatibility}
        params["policies.compatibility"] = "imagegen_bridge.compatibility"
    if fields.user is not None:
        data["user"] = fields.user
        params["user"] = "safety_identifier" if body.safety_identifier else "user"
    try:
        request = ImageRequest.model_validate(data)
    except ValidationError as exc:
        refusal = validation_refusal(exc, "the request does not make an image request")
        native = refusal.field
        param = rename_param(params, tool_param, native)
        message = refusal.message.replace(native, param, 1) if native and param else refusal.message
        raise invalid(param or "input", message) from None
    return ResponsesTranslation(
        request=request,
        body=body,
        tool=tool,
        tool_index=tool_index,
        params=params,
        warnings=[*warnings, *fields.warnings],
        normalizations=[
            item.model_copy(update={"field": f"{tool_param}.{item.field}"})
            for item in fields.normalizations
        ],
    )
