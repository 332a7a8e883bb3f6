"""Database access: the named SQL statements, connection pools, embedded server, migrations."""
