"""SQLite stores: the embedded default, one file per bridge instance (WAL, worker threads)."""
