"""No models: tickwork's tables are its own schema's, migrated by tickwork (this module only
makes Django send this app the ``post_migrate`` signal that migrates it)."""
