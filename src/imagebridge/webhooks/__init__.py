"""Signed webhooks: events in a durable outbox in the jobs database, delivered at least once.

:class:`WebhookService` is the entry point (endpoints, the emit port, deliveries); the
delivery loop is :class:`~.dispatcher.WebhookDispatcher`, one attempt
:class:`~.sender.WebhookSender`, the signatures :mod:`.signing` (Standard Webhooks, as
OpenAI signs), the address rules :mod:`.targets`. See docs/webhooks.md.
"""

from __future__ import annotations

from imagebridge.webhooks.dispatcher import DeliveryObserver, WebhookDispatcher, backoff_ms
from imagebridge.webhooks.sender import Attempt, WebhookSender
from imagebridge.webhooks.service import CreatedEndpoint, TestResult, WebhookService
from imagebridge.webhooks.settings import ConfiguredEndpoint, WebhookSettings
from imagebridge.webhooks.signing import new_secret, secret_hint, sign, signed_headers
from imagebridge.webhooks.targets import Resolver, TargetPolicy

__all__ = [
    "Attempt",
    "ConfiguredEndpoint",
    "CreatedEndpoint",
    "DeliveryObserver",
    "Resolver",
    "TargetPolicy",
    "TestResult",
    "WebhookDispatcher",
    "WebhookSender",
    "WebhookService",
    "WebhookSettings",
    "backoff_ms",
    "new_secret",
    "secret_hint",
    "sign",
    "signed_headers",
]
