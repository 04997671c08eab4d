"""YAML a workspace wrote (a modes file, a slash command's front matter), looked
at token by token before it is parsed: the scanner is a loop, while the parser
and composer recurse once or twice a level. A hand-written file needs neither
aliases (a small file could expand without end) nor deep nesting (a file of
`[[[[…` would exhaust the recursion limit), so either is refused, with its line.

PyYAML is imported where a file is read (the daemon's warm-up imports it): a
workspace with no such file never needs it, and no command waits for it.
"""

from __future__ import annotations

from typing import Final

__all__ = ["MAX_DEPTH", "refusal"]

#: Collections nested deeper than this are refused (a modes file needs about six).
MAX_DEPTH: Final = 20


def refusal(text: str) -> tuple[int, str] | None:
    """Why `text` is not to be parsed, with the 1-based line where it shows;
    None: parse it. A scanner error is raised (yaml.MarkedYAMLError), as the
    parser would raise it."""
    import yaml

    opening = (
        yaml.FlowSequenceStartToken,
        yaml.FlowMappingStartToken,
        yaml.BlockSequenceStartToken,
        yaml.BlockMappingStartToken,
    )
    closing = (yaml.FlowSequenceEndToken, yaml.FlowMappingEndToken, yaml.BlockEndToken)
    depth = 0
    for token in yaml.scan(text, Loader=yaml.SafeLoader):
        line = token.start_mark.line + 1
        if isinstance(token, yaml.AliasToken):
            return line, "YAML aliases (*name) are not allowed"
        if isinstance(token, opening):
            depth += 1
            if depth > MAX_DEPTH:
                return line, f"nested more than {MAX_DEPTH} levels deep"
        elif isinstance(token, closing):
            depth -= 1
    return None
