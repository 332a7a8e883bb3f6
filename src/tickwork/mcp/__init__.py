"""The MCP endpoint: assistants operate tickwork through the Model Context Protocol, with
exactly the powers of the person whose API token they hold.

- :mod:`~tickwork.mcp.bridge`: the REST API called in process, as that person
- :mod:`~tickwork.mcp.tools`: the tools (one REST route each), resources and prompts
- :mod:`~tickwork.mcp.server`: the server, over Streamable HTTP (``/mcp``) or stdio
"""
