"""File tools: read, write, edit, list and search files in the task's workspace.

All of them see the workspace through `Workspace`, so a path never leads out of
it and `.hdspignore` hides the same paths from every tool. The file-system work
runs in a worker thread (a 2 GB CSV must not stall the daemon's event loop), which
checks for cancellation as it goes, so cancelling the task stops a long search.

Output for the model is bounded: every tool states what it cut and how to get the
rest, because a model that does not know a result was cut draws wrong conclusions.
Write tools show the unified diff of their change in their `tool` message
(`preview`), so that a person approving the call, or any client watching, sees
exactly what changes.
"""

from __future__ import annotations

import functools
import json
import os
import re
import stat
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, ClassVar, TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread

from hdsp.protocol import shown_name

from .base import Tool, ToolCategory, ToolContext, ToolError, ToolResult
from .workspace import Workspace, WorkspaceEntry, gitignore_spec

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec

__all__ = [
    "EditFile",
    "ListFiles",
    "ReadFile",
    "SearchFiles",
    "WriteToFile",
    "unified_diff",
]

_T = TypeVar("_T")

#: Said under a listing that shows a name escaped (hdsp.protocol.file_names).
ESCAPED_NAMES_NOTE = (
    "[Names with \\xNN or \\uNNNN escapes hold bytes that are not UTF-8 or control "
    "characters: give them to the file tools as shown; in a shell, quote them as "
    "$'...' (bash reads the escapes back).]"
)
#: Bytes looked at to tell a binary file from a text file (as git does: a NUL).
_SNIFF_BYTES = 8192
#: The diff in a `tool` message is cut beyond this many characters.
MAX_DIFF_CHARS = 200_000


async def _in_thread(fn: Callable[..., _T], *args: Any) -> _T:
    """Run blocking file work in a worker thread; the work polls `_check_cancelled`."""
    return await anyio.to_thread.run_sync(functools.partial(fn, *args))


def _check_cancelled() -> None:
    """Raise the host task's cancellation inside a worker thread (long loops call
    this); a no-op when the work runs outside one (a direct call, a test)."""
    try:
        anyio.from_thread.check_cancelled()
    except anyio.NoEventLoopError:
        pass


def _looks_binary(head: bytes) -> bool:
    return b"\0" in head


def _binary_error(path: str) -> ToolError:
    return ToolError(
        f"{path!r} looks like a binary file (it contains NUL bytes), and read_file reads "
        "text only. Inspect it with code in the kernel instead (for example pandas for "
        "parquet/xlsx, PIL for images)."
    )


def _decode_cut(raw: bytes) -> str:
    """Decode a line cut at a byte limit without a stray replacement character."""
    for trim in range(4):
        try:
            return raw[: len(raw) - trim].decode("utf-8")
        except UnicodeDecodeError:
            continue
    return raw.decode("utf-8", errors="replace")


def _read_text(data: bytes, shown: str) -> str:
    """The whole text of a file a write tool changes; refuses binary and non-UTF-8."""
    if _looks_binary(data[:_SNIFF_BYTES]):
        raise ToolError(f"{shown!r} is a binary file; it cannot be edited as text.")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolError(
            f"{shown!r} is not valid UTF-8 (byte {exc.start}); it cannot be edited safely "
            "as text. Rewrite it whole with write_to_file if that is what you want."
        ) from exc


def _encoded(text: str, path: str) -> bytes:
    """`text` as UTF-8 for the file at `path`; text that is not Unicode (a lone
    surrogate from a JSON escape) is a ToolError, not a crash."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ToolError(
            f"The new content of {path!r} holds {text[exc.start]!r} at character "
            f"{exc.start}, which is not a Unicode character; nothing was written."
        ) from None


def _diff_lines(text: str) -> list[str]:
    if not text:
        return []
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1] + "\n\\ No newline at end of file\n")
    return lines


def unified_diff(old: str | None, new: str, relative: str) -> str:
    """A git-style unified diff of a file's change (`old` None: a new file)."""
    import difflib

    diff = "".join(
        difflib.unified_diff(
            _diff_lines(old or ""),
            _diff_lines(new),
            fromfile="/dev/null" if old is None else f"a/{relative}",
            tofile=f"b/{relative}",
        )
    )
    if len(diff) > MAX_DIFF_CHARS:
        cut = len(diff) - MAX_DIFF_CHARS
        diff = diff[:MAX_DIFF_CHARS] + f"\n[... the diff is cut here: {cut:,} more characters]\n"
    return diff


def _diff_stats(old: str | None, new: str) -> tuple[int, int]:
    """Lines added and removed."""
    import difflib

    added = removed = 0
    for line in difflib.unified_diff(_diff_lines(old or ""), _diff_lines(new), n=0):
        if line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    return added, removed


def _preview_json(tool: str, relative: str, **fields: Any) -> str:
    return json.dumps({"tool": tool, "path": relative, **fields})


# ---- read_file ----------------------------------------------------------------------


def _lines(f: IO[bytes], max_bytes: int) -> Iterator[tuple[bytes, bool]]:
    """The lines of `f` without their line ending, each cut at `max_bytes`, with
    whether it was cut; a long line is skipped over without being held whole."""
    while True:
        raw = f.readline(max_bytes)
        if not raw:
            return
        cut = False
        chunk = raw
        while len(chunk) == max_bytes and not chunk.endswith(b"\n"):
            chunk = f.readline(max_bytes)
            if not chunk:
                break
            cut = True
        if raw.endswith(b"\n"):
            raw = raw[:-1]
            if raw.endswith(b"\r"):
                raw = raw[:-1]
        yield raw, cut


def _count_rest(f: IO[bytes], counted: int) -> int:
    """The file's line count: `counted` lines read so far, plus those after them."""
    newlines = 0
    last = b""
    while chunk := f.read(1 << 20):
        _check_cancelled()
        newlines += chunk.count(b"\n")
        last = chunk[-1:]
    return counted + newlines + (1 if last not in (b"", b"\n") else 0)


class ReadFile(Tool):
    name: ClassVar[str] = "read_file"
    description: ClassVar[str] = (
        "Read a text file in the workspace. The output shows each line with its line "
        "number (`  12 | text`); the numbers are not part of the file, so leave them out "
        "of edit_file's search text. Use start_line/end_line to read part of a large "
        "file; long output is cut, and the note at the end says where to read on. "
        "Binary files (images, parquet, pickles) are refused: inspect them with code."
    )
    parameters: ClassVar[Mapping[str, Any]] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path, relative to the workspace."},
            "start_line": {
                "type": "integer",
                "minimum": 1,
                "description": "First line to read (1-based). Default: 1.",
            },
            "end_line": {
                "type": "integer",
                "minimum": 1,
                "description": "Last line to read (inclusive). Default: the end of the file.",
            },
        },
        "required": ["path"],
        "additionalProperties": False,
    }
    category: ClassVar[ToolCategory] = ToolCategory.READ

    def __init__(self, *, max_chars: int = 50_000, max_line_chars: int = 4_000) -> None:
        #: The output is cut before it grows past this many characters.
        self.max_chars = max_chars
        #: Each line is cut at this many characters (minified JSON, one-line CSVs).
        self.max_line_chars = max_line_chars

    async def execute(self, ctx: ToolContext, args: Mapping[str, Any]) -> ToolResult:
        return ToolResult.text(await _in_thread(self.read, ctx.workspace, args))

    def read(self, root: Path, args: Mapping[str, Any]) -> str:
        start = int(args.get("start_line") or 1)
        end: int | None = int(args["end_line"]) if args.get("end_line") is not None else None
        if end is not None and end < start:
            raise ToolError(f"end_line ({end}) is before start_line ({start}).")
        given = str(args["path"])
        with Workspace(root).open(given) as (located, fd):
            if located.is_dir:
                raise ToolError(f"{given!r} is a directory; list_files shows what it holds.")
            with os.fdopen(os.dup(fd), "rb") as f:
                return self._read(f, given, located.shown, start, end)

    def _read(self, f: IO[bytes], given: str, relative: str, start: int, end: int | None) -> str:
        shown: list[tuple[int, str]] = []
        used = 0
        cut_at: int | None = None
        long_lines = 0
        bad_utf8 = False
        lineno = 0
        total: int | None = None
        if _looks_binary(f.read(_SNIFF_BYTES)):
            raise _binary_error(given)
        f.seek(0)
        for raw, cut in _lines(f, self.max_line_chars):
            lineno += 1
            if lineno % 10_000 == 0:
                _check_cancelled()
            if lineno < start:
                continue
            if end is not None and lineno > end:
                total = _count_rest(f, lineno)
                break
            if cut:
                long_lines += 1
                text = _decode_cut(raw) + " [... line cut]"
            else:
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError:
                    text = raw.decode("utf-8", errors="replace")
                    bad_utf8 = True
            size = len(str(lineno)) + 4 + len(text)
            if shown and used + size > self.max_chars:
                cut_at = lineno
                total = _count_rest(f, lineno)
                break
            shown.append((lineno, text))
            used += size
        if total is None:
            total = lineno
        if total == 0:
            return f"{relative}: the file is empty."
        if not shown:
            raise ToolError(
                f"start_line {start} is past the end of {relative!r}, which has {total} lines."
            )
        last_shown = shown[-1][0]
        width = len(str(last_shown))
        out = [f"{relative}: lines {start}-{last_shown} of {total}"]
        out.extend(f"{n:>{width}} | {text}" for n, text in shown)
        if cut_at is not None:
            wanted = min(end, total) if end is not None else total
            out.append(
                f"[Output cut: lines {cut_at}-{wanted} are not shown; the output limit of "
                f"{self.max_chars:,} characters was reached. Read on with start_line={cut_at}.]"
            )
        if long_lines:
            out.append(
                f"[{long_lines} line(s) longer than {self.max_line_chars:,} characters were "
                "cut; read such data with code instead.]"
            )
        if bad_utf8:
            out.append("[The file is not valid UTF-8; undecodable bytes are shown as \ufffd.]")
        return "\n".join(out)


# ---- write_to_file ---------------------------------------------------------------------


class WriteToFile(Tool):
    name: ClassVar[str] = "write_to_file"
    description: ClassVar[str] = (
        "Create a file, or replace a file's whole content, in the workspace. Parent "
        "directories are created. Give the complete content: nothing of the old file is "
        "kept. To change part of an existing file, prefer edit_file."
    )
    parameters: ClassVar[Mapping[str, Any]] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path, relative to the workspace."},
            "content": {"type": "string", "description": "The complete new content."},
        },
        "required": ["path", "content"],
        "additionalProperties": False,
    }
    category: ClassVar[ToolCategory] = ToolCategory.WRITE

    def written_paths(self, args: Mapping[str, Any]) -> list[str]:
        return [str(args["path"])]

    def approval_text(self, args: Mapping[str, Any]) -> str:
        return _preview_json(self.name, str(args.get("path")), content=args.get("content"))

    async def preview(self, ctx: ToolContext, args: Mapping[str, Any]) -> str:
        try:
            return await _in_thread(self._preview, ctx.workspace, args)
        except ToolError:
            return self.approval_text(args)

    def _preview(self, root: Path, args: Mapping[str, Any]) -> str:
        relative, old = self._target(Workspace(root), str(args["path"]))
        return _preview_json(
            self.name,
            relative,
            isNewFile=old is None,
            diff=unified_diff(old, str(args["content"]), relative),
        )

    @staticmethod
    def _target(ws: Workspace, given: str) -> tuple[str, str | None]:
        """The path as the model sees it, and the file's text now (None: new)."""
        located, data = ws.read_bytes(given, write=True)
        return located.shown, _old_text(data)

    async def execute(self, ctx: ToolContext, args: Mapping[str, Any]) -> ToolResult:
        return ToolResult.text(await _in_thread(self.write, ctx.workspace, args))

    def write(self, root: Path, args: Mapping[str, Any]) -> str:
        content = str(args["content"])
        found: list[bytes | None] = []
        located, _ = Workspace(root).write_bytes(
            str(args["path"]), _encoded(content, str(args["path"])), check=found.append
        )
        relative, old = located.shown, _old_text(found[0])
        if old is None:
            return f"Created {relative} ({len(_diff_lines(content))} lines)."
        if old == content:
            return f"{relative} already had this content; nothing changed."
        added, removed = _diff_stats(old, content)
        return f"Wrote {relative}: +{added} -{removed} lines."


# ---- edit_file ---------------------------------------------------------------------


def _occurrences(text: str, search: str) -> list[int]:
    """Every position where `search` starts in `text`, overlapping ones included."""
    found = []
    at = text.find(search)
    while at != -1:
        found.append(at)
        at = text.find(search, at + 1)
    return found


_LINE_NUMBER_PREFIX = re.compile(r"^\s*\d+ \| ", re.MULTILINE)


def _no_match_hint(text: str, search: str) -> str:
    if _LINE_NUMBER_PREFIX.match(search):
        return " It starts with a line number from read_file (`12 | `); leave those out."
    first = next((line.strip() for line in search.split("\n") if line.strip()), "")
    if first:
        lines = text.split("\n")
        near = [n for n, line in enumerate(lines, 1) if line.strip() == first][:5]
        if near:
            where = ", ".join(str(n) for n in near)
            return (
                f" Its first line appears (ignoring indentation) at line {where}: check "
                "whitespace and the lines after it; read_file shows the current text."
            )
    return " read_file shows the current text."


def _old_text(data: bytes | None) -> str | None:
    """A file's text as a diff shows it (None: no file)."""
    if data is None:
        return None
    if _looks_binary(data[:_SNIFF_BYTES]):
        return "(binary content)\n"
    return data.decode("utf-8", errors="replace")


@dataclass(frozen=True)
class _Edited:
    given: str
    relative: str
    old: str
    new: str


class EditFile(Tool):
    name: ClassVar[str] = "edit_file"
    description: ClassVar[str] = (
        "Change part of an existing text file with search/replace blocks, applied in "
        "order. Each `search` must be copied exactly from the current file (whitespace "
        "and indentation included, without read_file's line numbers) and must match "
        "exactly once: add surrounding lines to make it unique. If any block fails, "
        "nothing is changed and the error says which block and why. Use an empty "
        "`replace` to delete. To create a file, use write_to_file."
    )
    parameters: ClassVar[Mapping[str, Any]] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path, relative to the workspace."},
            "edits": {
                "type": "array",
                "minItems": 1,
                "description": "Search/replace blocks, applied one after the other.",
                "items": {
                    "type": "object",
                    "properties": {
                        "search": {
                            "type": "string",
                            "minLength": 1,
                            "description": "Exact text to find; must occur exactly once.",
                        },
                        "replace": {"type": "string", "description": "Text to put in its place."},
                    },
                    "required": ["search", "replace"],
                    "additionalProperties": False,
                },
            },
        },
        "required": ["path", "edits"],
        "additionalProperties": False,
    }
    category: ClassVar[ToolCategory] = ToolCategory.WRITE

    def written_paths(self, args: Mapping[str, Any]) -> list[str]:
        return [str(args["path"])]

    async def preview(self, ctx: ToolContext, args: Mapping[str, Any]) -> str:
        try:
            edited = await _in_thread(self.apply, ctx.workspace, args)
        except ToolError:
            return self.approval_text(args)
        return _preview_json(
            self.name, edited.relative, diff=unified_diff(edited.old, edited.new, edited.relative)
        )

    def apply(self, root: Path, args: Mapping[str, Any]) -> _Edited:
        """The file's text before and after the edits, or a ToolError naming every
        block that does not match exactly once."""
        ws = Workspace(root)
        given = str(args["path"])
        located, data = ws.read_bytes(given, write=True)
        if data is None:
            raise ToolError(f"{given!r} does not exist; create it with write_to_file.")
        old = _read_text(data, given)
        # A file written with CRLF throughout is edited as if it had LF (what the
        # model sends) and written back with CRLF.
        crlf = "\r\n" in old and old.count("\r\n") == old.count("\n")
        text = old.replace("\r\n", "\n") if crlf else old
        edits = list(args["edits"])
        problems = []
        for number, block in enumerate(edits, 1):
            search, replace = str(block["search"]), str(block["replace"])
            if crlf:
                search, replace = search.replace("\r\n", "\n"), replace.replace("\r\n", "\n")
            found = _occurrences(text, search)
            label = f"block {number} of {len(edits)}"
            if not found:
                problems.append(
                    f"- {label}: the search text was not found.{_no_match_hint(text, search)}"
                )
            elif len(found) > 1:
                lines = ", ".join(str(text.count("\n", 0, at) + 1) for at in found[:10])
                problems.append(
                    f"- {label}: the search text matches {len(found)} times (at lines "
                    f"{lines}); include more surrounding lines so it matches once."
                )
            else:
                at = found[0]
                text = text[:at] + replace + text[at + len(search) :]
        relative = located.shown
        if problems:
            raise ToolError(f"edit_file changed nothing in {relative!r}:\n" + "\n".join(problems))
        new = text.replace("\n", "\r\n") if crlf else text
        return _Edited(given=given, relative=relative, old=old, new=new)

    async def execute(self, ctx: ToolContext, args: Mapping[str, Any]) -> ToolResult:
        return ToolResult.text(await _in_thread(self.edit, ctx.workspace, args))

    def edit(self, root: Path, args: Mapping[str, Any]) -> str:
        edited = self.apply(root, args)
        Workspace(root).write_bytes(
            edited.given, _encoded(edited.new, edited.given), create_parents=False
        )
        added, removed = _diff_stats(edited.old, edited.new)
        blocks = len(args["edits"])
        return (
            f"Edited {edited.relative}: {blocks} block{'s' if blocks != 1 else ''} applied, "
            f"+{added} -{removed} lines."
        )


# ---- list_files ---------------------------------------------------------------------


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    value = n / 1024
    for unit in ("KB", "MB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"


class ListFiles(Tool):
    name: ClassVar[str] = "list_files"
    description: ClassVar[str] = (
        "List files and directories in the workspace (directories end with `/`, files "
        "show their size). Paths are relative to the workspace. With recursive=true, "
        "subdirectories are listed too, top levels first; caches and environments "
        "(.git, __pycache__, .venv, node_modules, ...) are not entered unless you list "
        "them directly. The listing stops at `limit` entries and says so."
    )
    parameters: ClassVar[Mapping[str, Any]] = {
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "description": "Directory, relative to the workspace. Default: the workspace.",
            },
            "recursive": {"type": "boolean", "description": "List subdirectories too."},
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": 5000,
                "description": "Most entries to list. Default: 200.",
            },
        },
        "additionalProperties": False,
    }
    category: ClassVar[ToolCategory] = ToolCategory.READ

    async def execute(self, ctx: ToolContext, args: Mapping[str, Any]) -> ToolResult:
        return ToolResult.text(await _in_thread(self.list, ctx.workspace, args))

    def list(self, root: Path, args: Mapping[str, Any]) -> str:
        ws = Workspace(root)
        given = str(args.get("path") or ".")
        recursive = bool(args.get("recursive", False))
        limit = int(args.get("limit") or 200)
        with ws.open(given) as (located, _):
            if not located.is_dir:
                raise ToolError(f"{given!r} is a file, not a directory; read_file reads it.")
        relative = located.shown
        lines: list[str] = []
        more = escaped = False
        for entry in ws.walk(located.relative, recursive=recursive):
            if len(lines) % 1000 == 0:
                _check_cancelled()
            if len(lines) >= limit:
                more = True
                break
            escaped = escaped or entry.shown != entry.relative
            lines.append(
                f"{entry.shown}/" if entry.is_dir else f"{entry.shown}  ({_size(entry.size or 0)})"
            )
        where = "the workspace" if relative == "." else f"{relative}/"
        head = f"Contents of {where}{' (recursive)' if recursive else ''}:"
        if not lines:
            return f"{head}\n(empty)"
        out = [head, *lines]
        if escaped:
            out.append(ESCAPED_NAMES_NOTE)
        if more:
            out.append(
                f"[Stopped at the limit of {limit} entries; more exist. List a subdirectory, "
                "or raise limit.]"
            )
        return "\n".join(out)


# ---- search_files -------------------------------------------------------------------


class SearchFiles(Tool):
    name: ClassVar[str] = "search_files"
    description: ClassVar[str] = (
        "Search the text files of the workspace for a regular expression (Python `re` "
        "syntax; add (?i) for case-insensitive), like grep. Shows `path`, then "
        "`line:text` for matches and `line-text` for context lines. Binary files are "
        "skipped. Narrow with path and file_pattern (a glob such as `*.py` or "
        "`notebooks/**/*.ipynb`). Results stop at max_results matches and say so."
    )
    parameters: ClassVar[Mapping[str, Any]] = {
        "type": "object",
        "properties": {
            "regex": {"type": "string", "minLength": 1, "description": "Regular expression."},
            "path": {
                "type": "string",
                "description": "Directory or file to search, relative to the workspace. "
                "Default: the workspace.",
            },
            "file_pattern": {
                "type": "string",
                "description": "Only files whose workspace path matches this glob.",
            },
            "context_lines": {
                "type": "integer",
                "minimum": 0,
                "maximum": 10,
                "description": "Lines of context before and after each match. Default: 0.",
            },
            "max_results": {
                "type": "integer",
                "minimum": 1,
                "maximum": 1000,
                "description": "Most matches to show. Default: 100.",
            },
        },
        "required": ["regex"],
        "additionalProperties": False,
    }
    category: ClassVar[ToolCategory] = ToolCategory.READ

    def __init__(self, *, max_file_bytes: int = 20_000_000, max_line_chars: int = 500) -> None:
        #: Larger files are skipped (and counted in the result).
        self.max_file_bytes = max_file_bytes
        #: Lines shown are cut at this many characters.
        self.max_line_chars = max_line_chars

    async def execute(self, ctx: ToolContext, args: Mapping[str, Any]) -> ToolResult:
        return ToolResult.text(await _in_thread(self.search, ctx.workspace, args))

    def search(self, root: Path, args: Mapping[str, Any]) -> str:
        pattern = str(args["regex"])
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            where = f" at position {exc.pos}" if exc.pos is not None else ""
            raise ToolError(
                f"Invalid regex {pattern!r}: {exc.msg}{where}. Python's `re` syntax is used; "
                "escape special characters such as ( [ { . * + ? with a backslash."
            ) from exc
        glob: GitIgnoreSpec | None = None
        if args.get("file_pattern"):
            try:
                glob = gitignore_spec([str(args["file_pattern"])])
            except ValueError as exc:
                raise ToolError(f"Invalid file_pattern {args['file_pattern']!r}: {exc}") from exc
        context = int(args.get("context_lines") or 0)
        cap = int(args.get("max_results") or 100)
        ws = Workspace(root)
        given = str(args.get("path") or ".")
        with ws.open(given) as (start, _):
            pass
        files = ws.files(start.relative) if start.is_dir else self._one_file(ws, given)
        out: list[str] = []
        matches = files_matched = skipped_big = skipped_binary = 0
        truncated = False
        for entry, fd in files:
            _check_cancelled()
            relative = entry.relative
            shown_relative = shown_name(relative)
            if glob is not None and not (
                glob.match_file(relative) or glob.match_file(shown_relative)
            ):
                continue
            try:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode):
                    continue
                if st.st_size > self.max_file_bytes:
                    skipped_big += 1
                    continue
                with os.fdopen(os.dup(fd), "rb") as f:
                    if _looks_binary(f.read(_SNIFF_BYTES)):
                        skipped_binary += 1
                        continue
                    f.seek(0)
                    shown, found, truncated = self._search_file(f, regex, context, cap - matches)
            except OSError:
                continue  # unreadable
            if found:
                files_matched += 1
                matches += found
                out.append(shown_relative)
                out.extend(shown)
            if truncated:
                break
        head = (
            f"Found {matches} match{'es' if matches != 1 else ''} in {files_matched} "
            f"file{'s' if files_matched != 1 else ''} for {pattern!r}."
            if matches
            else f"No matches for {pattern!r}."
        )
        notes = []
        if truncated:
            notes.append(
                f"[Stopped at {cap} matches; more exist. Narrow the regex, path or file_pattern.]"
            )
        if skipped_big:
            notes.append(
                f"[{skipped_big} file(s) larger than {_size(self.max_file_bytes)} were not "
                "searched; search them with code.]"
            )
        if skipped_binary:
            notes.append(f"[{skipped_binary} binary file(s) were skipped.]")
        return "\n".join([head, *out, *notes])

    @staticmethod
    def _one_file(ws: Workspace, given: str) -> Iterator[tuple[WorkspaceEntry, int]]:
        with ws.open(given) as (located, fd):
            entry = WorkspaceEntry(
                path=ws.root / located.relative,
                relative=located.relative,
                is_dir=False,
                size=os.fstat(fd).st_size,
            )
            yield entry, fd

    def _search_file(
        self, f: IO[bytes], regex: re.Pattern[str], context: int, budget: int
    ) -> tuple[list[str], int, bool]:
        """Match and context lines of one file (grep -n style), the number of
        matches, and whether the match budget ran out before the file did."""
        out: list[str] = []
        before: deque[tuple[int, str]] = deque(maxlen=context)
        after = 0
        last_shown = 0
        found = 0
        for lineno, raw in enumerate(f, 1):
            if lineno % 10_000 == 0:
                _check_cancelled()
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if regex.search(line):
                if found >= budget:
                    return out, found, True
                found += 1
                first = before[0][0] if before else lineno
                if last_shown and first > last_shown + 1:
                    out.append("--")
                out.extend(f"{n}-{self._cut(text)}" for n, text in before)
                before.clear()
                out.append(f"{lineno}:{self._cut(line)}")
                last_shown = lineno
                after = context
            elif after > 0:
                out.append(f"{lineno}-{self._cut(line)}")
                last_shown = lineno
                after -= 1
            else:
                before.append((lineno, line))
        return out, found, False

    def _cut(self, line: str) -> str:
        if len(line) <= self.max_line_chars:
            return line
        return line[: self.max_line_chars] + f" [... {len(line) - self.max_line_chars:,} more]"
