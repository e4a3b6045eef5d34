"""Every backend-neutral rule of the stores, one module per subject.

SQLite and PostgreSQL keep their own SQL and transactions; everything that decides whether an
input is accepted, what is stored for it and which error a refusal carries lives here, so the
same input gets the same answer (and the same error first) whatever the backend.

* :mod:`.values`: text, identifiers, integer bounds and JSON objects, used by every store;
* :mod:`.jobs`: job submission, accounting, transitions and the job errors;
* :mod:`.history`: history listings (filters, search, paging conditions), updates, pruning;
* :mod:`.pages`: page sizes and where a page starts;
* :mod:`.queue`: the shared queue's leases, routes and notification codec;
* :mod:`.presets` and :mod:`.sessions`: the preset and session-binding rules;
* :mod:`.keys`: API keys, their secrets and quota windows;
* :mod:`.webhooks`: the webhook outbox's events, payloads, who receives them, its bounds;
* :mod:`.schema`: what a store's schema is (numbered migrations, the name they are recorded
  under), refusing a newer schema, plain SQL identifiers;
* :mod:`.errors`: the error each kind of database failure becomes (full disk, busy, refused
  write, closed), so both backends fail alike.
"""
