"""The runtimes of definitions: the HTTP client and the script runner, each a worker on its
own queue (``tickwork worker --runtime http|bash|python|node|groovy``)."""
