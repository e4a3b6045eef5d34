"""Every wire model of the contract is strict (issue #2 item 2: unknown keys rejected)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest
from pydantic import ValidationError

import imagebridge.contract
from imagebridge.contract._base import ContractModel


def _contract_models() -> list[type[ContractModel]]:
    for module in pkgutil.iter_modules(imagebridge.contract.__path__):
        importlib.import_module(f"imagebridge.contract.{module.name}")
    found: list[type[ContractModel]] = []
    pending = list(ContractModel.__subclasses__())
    while pending:
        model = pending.pop()
        pending.extend(model.__subclasses__())
        if model.__module__.startswith("imagebridge.contract."):
            found.append(model)
    return sorted(set(found), key=lambda m: m.__qualname__)


MODELS = _contract_models()


def test_the_whole_contract_is_covered() -> None:
    names = {model.__name__ for model in MODELS}
    for expected in (
        "ImageRequest",
        "ImageResponse",
        "ProviderCapabilities",
        "ImageJob",
        "ImageJobUpdate",
        "ImagePresetCreate",
        "ImagePresetWrite",
        "CompatibleGenerationRequest",
        "CompatImagesResponse",
        "PartialImageEvent",
        "ErrorEnvelope",
    ):
        assert expected in names


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_unknown_keys_are_rejected(model: type[ContractModel]) -> None:
    with pytest.raises(ValidationError) as caught:
        model.model_validate({"an_unknown_key": 1})
    assert any(
        error["type"] == "extra_forbidden" and error["loc"] == ("an_unknown_key",)
        for error in caught.value.errors()
    )
