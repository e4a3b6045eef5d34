"""``GET /v1/models`` in OpenAI's shapes: the names a client's model picker offers."""

from __future__ import annotations

from typing import Literal

from imagebridge.contract._base import U64, ContractModel, StrictStr

__all__ = ["CompatModel", "CompatModelList"]


class CompatModel(ContractModel):
    """One entry of ``GET /v1/models`` (OpenAI's ``Model``)."""

    id: StrictStr
    object: Literal["model"] = "model"
    created: U64
    owned_by: StrictStr


class CompatModelList(ContractModel):
    """``GET /v1/models``: OpenAI's list shape."""

    object: Literal["list"] = "list"
    data: list[CompatModel]
