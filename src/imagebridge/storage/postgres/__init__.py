"""PostgreSQL stores: one database shared by several bridge instances (the ``postgres`` extra).

Imported on first use, so SQLite works without psycopg installed.
"""
