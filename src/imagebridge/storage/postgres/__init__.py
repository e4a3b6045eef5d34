"""PostgreSQL stores: one database shared by several bridge instances (the ``postgres`` extra).

Imported on first use, so SQLite works without psycopg installed. Built like
:mod:`imagebridge.storage.sqlite`, file for file: the stores (``jobs``, ``shared_queue``,
``presets``, ``sessions``, ``keys``; the jobs table in ``job_schema``) run on one
:class:`~.database.PostgresDatabase` each (``database``), which reaches the server through
``connection``, migrates the schema with ``migrations``, runs statements with ``queries``,
and turns every failure into a :class:`~imagebridge.contract.errors.BridgeError` in
``errors``; ``inspection`` reads a schema version without changing anything. ``url`` (the
options and URL redaction) is the one module read without psycopg.
"""
