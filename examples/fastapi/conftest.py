# tickwork's pytest plugin: a throwaway schema on TICKWORK_TEST_DATABASE_URL (or an embedded
# PostgreSQL) for the session, before shop.py is imported
pytest_plugins = ["tickwork.testing"]
