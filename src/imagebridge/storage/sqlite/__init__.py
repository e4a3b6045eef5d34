"""SQLite stores: the embedded default, one file per bridge instance (WAL, worker threads).

Built like :mod:`imagebridge.storage.postgres`, file for file: the stores (``jobs``,
``shared_queue``, ``presets``, ``sessions``, ``keys``; the jobs table in ``job_schema``) run
on one :class:`~.database.SqliteDatabase` each (``database``), which reaches its file through
``connection``, migrates it with ``migrations``, runs statements with ``queries``, and turns
every failure into a :class:`~imagebridge.contract.errors.BridgeError` in ``errors``;
``inspection`` reads a schema version without changing anything.
"""
