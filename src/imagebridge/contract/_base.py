"""Shared building blocks for contract models: the strict base class and wire scalars."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, Strict, ValidationError, model_validator

from imagebridge.contract.errors import BridgeError

__all__ = [
    "U8",
    "U16",
    "U32",
    "U64",
    "ContractModel",
    "RequestModel",
    "StrictBool",
    "StrictStr",
    "decode_model",
    "omit_empty",
    "omit_none",
]

U8 = Annotated[int, Strict(), Field(ge=0, le=255)]
U16 = Annotated[int, Strict(), Field(ge=0, le=65_535)]
U32 = Annotated[int, Strict(), Field(ge=0, le=4_294_967_295)]
U64 = Annotated[int, Strict(), Field(ge=0, le=18_446_744_073_709_551_615)]
StrictBool = Annotated[bool, Strict()]
StrictStr = Annotated[str, Strict()]


def _is_none(value: Any) -> bool:
    return value is None


def _is_empty(value: Any) -> bool:
    return value is None or (hasattr(value, "__len__") and len(value) == 0)


omit_none: Callable[[Any], bool] = _is_none
"""``exclude_if`` predicate: the key is absent on the wire when the value is ``None``."""

omit_empty: Callable[[Any], bool] = _is_empty
"""``exclude_if`` predicate: the key is absent on the wire when the collection is empty."""


class ContractModel(BaseModel):
    """Strict wire model: unknown keys are rejected; absent optionals are omitted on output."""

    model_config = ConfigDict(extra="forbid", populate_by_name=False, validate_default=False)

    def to_wire(self) -> dict[str, Any]:
        """JSON-ready dict in contract form (omission rules applied)."""
        return self.model_dump(mode="json")

    def to_json(self) -> str:
        return self.model_dump_json()


class RequestModel(ContractModel):
    """A model clients send: JSON ``null`` for an optional field means the field is absent.

    The original's SDKs send ``null`` for every unset optional field (``"routing":
    {"provider": null}``, ``"parameters": {"quality": null}`` …). Dropping those keys before
    validation gives them their defaults; a ``null`` for a required field is still refused.
    """

    @model_validator(mode="before")
    @classmethod
    def _null_means_absent(cls, raw: Any) -> Any:
        if not isinstance(raw, dict):
            return raw
        fields = cls.model_fields
        return {
            key: value
            for key, value in raw.items()
            if value is not None or key not in fields or fields[key].is_required()
        }


M = TypeVar("M", bound=BaseModel)


def decode_model(model: type[M], data: bytes | str | Any, message: str) -> M:
    """Decode a body into ``model`` or raise the contract's body-rejection error.

    The message is the only thing the caller sees: pydantic's own text could echo values.
    """
    try:
        if isinstance(data, bytes | bytearray | str):
            return model.model_validate_json(data)
        return model.model_validate(data)
    except ValidationError as exc:
        raise BridgeError.invalid_request(message) from exc
    except (ValueError, TypeError, RecursionError) as exc:
        raise BridgeError.invalid_request(message) from exc
