"""hdsp as an MCP server (`hdsp mcp serve`): an MCP host's model uses hdsp's
kernels, notebooks and tasks through it. See :mod:`.server`.

Nothing is imported here: the CLI imports :mod:`.command` for its parser, and the
`mcp` SDK (half a second to import) comes with :mod:`.server` only when
`hdsp mcp serve` runs.
"""
