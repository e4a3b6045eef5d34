"""OpenAI's usage block on the compatible routes, from each provider family's counts."""

from __future__ import annotations

from openai.types.images_response import Usage as OpenAIUsage

from imagebridge.contract.openai.images import compat_usage
from imagebridge.contract.response import Usage


def test_no_counts_means_no_usage_block() -> None:
    assert compat_usage(None) is None
    assert compat_usage(Usage()) is None  # the Codex backend reported nothing


def test_openai_upstream_split_is_kept() -> None:
    usage = Usage(
        input_tokens=50,
        output_tokens=4160,
        total_tokens=4210,
        provider={"input_image_tokens": 40, "input_text_tokens": 10, "output_image_tokens": 4160},
    )
    block = compat_usage(usage)
    assert block is not None
    decoded = OpenAIUsage.model_validate(block.to_wire(), strict=True)
    assert decoded.input_tokens_details.image_tokens == 40
    assert decoded.input_tokens_details.text_tokens == 10
    assert decoded.output_tokens_details is not None
    assert decoded.output_tokens_details.image_tokens == 4160
    assert decoded.total_tokens == 4210


def test_codex_image_tool_counts_replace_the_carrier_models() -> None:
    usage = Usage(
        input_tokens=900,  # the chat model carrying the tool call
        output_tokens=30,
        total_tokens=930,
        provider={
            "image_gen_input_tokens": 20,
            "image_gen_input_text_tokens": 20,
            "image_gen_output_tokens": 1056,
            "image_gen_total_tokens": 1076,
            "image_gen_images": 1,
        },
    )
    block = compat_usage(usage)
    assert block is not None
    assert (block.input_tokens, block.output_tokens, block.total_tokens) == (20, 1056, 1076)
    assert block.input_tokens_details.text_tokens == 20
    assert block.output_tokens_details.image_tokens == 1056


def test_without_a_split_input_is_text_and_output_is_image() -> None:
    block = compat_usage(Usage(input_tokens=3, output_tokens=100))
    assert block is not None
    assert block.total_tokens == 103
    assert (block.input_tokens_details.text_tokens, block.input_tokens_details.image_tokens) == (
        3,
        0,
    )
    assert block.output_tokens_details.image_tokens == 100
