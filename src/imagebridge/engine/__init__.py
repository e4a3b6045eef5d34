"""The engine: one logical image request, from validation to verified, materialized images.

:mod:`.runtime` (:class:`~.runtime.ImageRuntime`) runs the use case: validate →
idempotency → admission → for each route (primary, then fallbacks) breaker → capabilities →
negotiation → provider (with deadline, cancellation and fan-out) → verification and
materialization. It owns the ports the adapters implement: :mod:`.provider` (``Provider``,
``ProviderContext``), :mod:`.inputs` (loaded input images), the artifact ports in
:mod:`.publishing`, plus :mod:`.cancellation` and deadlines. It imports no adapter and no
configuration: application/ hands it plain settings (docs/architecture.md).
"""
