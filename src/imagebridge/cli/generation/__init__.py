"""``generate`` and ``edit``: flags → request, execution, rendering, preview."""
