"""hdsp as an Agent Client Protocol agent (`hdsp acp`): ACP hosts such as
Jupyter AI and Zed drive hdsp tasks through it. See :mod:`.agent`.

Nothing is imported here: the CLI imports :mod:`.command` for its parser, and the
`acp` SDK (over half a second to import) comes with :mod:`.agent` only when
`hdsp acp` runs.
"""
