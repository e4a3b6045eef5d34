"""Prometheus exposition (docs/operations.md §4): one prefix, ``imagegen_bridge_``.

* :mod:`.original`: the original's families, exactly (synchronous routes only), and the
  runtime's queues, limits, breakers and pool-account counters;
* :mod:`.images`: every image and operation of every surface, by route, provider, model,
  pool account, API key name and outcome (the observer of jobs/outcomes.py);
* :mod:`.gauges`: key quotas, jobs, pool-account quota readings and storage health, read
  from the stores before each scrape, bounded in time and frequency;
* :mod:`.surfaces`: which surface a request came through, and the synchronous routes'
  hook; :mod:`.labels` bounds label values, :mod:`.collector` puts it together.

Labels hold provider names, configured account names, API key names, model names and
error codes only — never prompts, secrets, key prefixes or ids.
"""

from imagebridge.server.metrics.collector import METRICS_CONTENT_TYPE, BridgeMetrics
from imagebridge.server.metrics.histogram import BUCKETS_SECONDS

__all__ = ["BUCKETS_SECONDS", "METRICS_CONTENT_TYPE", "BridgeMetrics"]
