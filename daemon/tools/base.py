"""What a tool is: a name, a description written for the model, a JSON Schema for
its arguments, a category (for approvals), and an async `execute`.

A tool never talks to sockets or the store itself; it acts through the
`ToolContext` its task hands it (say/ask/update messages, the workspace, the
task's kernel), so that every effect is journalled and every client sees it.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from hdsp.daemon.conversation import ImageBlock, TextBlock
from hdsp.protocol import AskResponse, ClineMessage, PromptContext

__all__ = [
    "AskAnswer",
    "Tool",
    "ToolCategory",
    "ToolContext",
    "ToolContextBase",
    "ToolError",
    "ToolResult",
]


class ToolCategory(enum.StrEnum):
    """Approval classes (seed 004): each has its own always-allow switch."""

    READ = "read"
    WRITE = "write"
    #: Runs code in a Jupyter kernel.
    EXECUTE = "execute"
    #: Runs a shell command.
    COMMAND = "command"
    MCP = "mcp"
    SUBTASK = "subtask"
    FOLLOWUP = "followup"
    #: switch_mode: a task changes its own mode.
    MODE = "mode"
    #: update_todo_list: the task's checklist.
    TODO = "todo"
    #: attempt_completion: never needs approval.
    COMPLETION = "completion"


class ToolError(Exception):
    """A failure the model should read and can act on (a missing file, a search
    block that does not match). The message goes back to the model as the tool
    result, marked as an error."""


@dataclass
class ToolResult:
    content: list[TextBlock | ImageBlock]
    is_error: bool = False
    #: Set by attempt_completion: the turn ends once this result is recorded.
    completes_task: bool = False
    #: For a tool that showed its output to people in messages of its own
    #: (`command_output`, `cell_output`): what else its result says (an exit
    #: code, a kernel's status), shown instead of the whole result.
    summary: str | None = None

    @classmethod
    def text(cls, text: str, *, is_error: bool = False) -> ToolResult:
        return cls(content=[TextBlock(text=text)], is_error=is_error)


@dataclass(frozen=True)
class AskAnswer:
    """A client's answer to an ask (Roo's askResponse, text, images)."""

    response: AskResponse
    text: str | None = None
    images: list[str] = field(default_factory=list)
    #: Who answered: a client's name, or what answered for nobody ("timeout").
    by: str | None = None
    #: What an answer with text is about (the notebook, cell, ...), kept on the
    #: user's message...
    context: PromptContext | None = None
    #: ...and as the model reads it (a delimited block of data, never instructions).
    context_block: str | None = None
    #: Over TCP: the name the answering client's key is authorised under, kept on
    #: the user's message an answer with text becomes.
    sent_by: str | None = None

    @property
    def approved(self) -> bool:
        return self.response == AskResponse.YES


class ToolContext(Protocol):
    """What a running tool may do; implemented by the task."""

    @property
    def task_id(self) -> str: ...

    @property
    def workspace(self) -> Path: ...

    async def say(
        self, say: str, text: str | None = None, *, partial: bool = False, **fields: Any
    ) -> ClineMessage: ...

    async def update(self, message: ClineMessage, **changes: Any) -> ClineMessage: ...

    async def ask(self, ask: str, text: str | None = None, **fields: Any) -> AskAnswer:
        """Ask every client and wait for the first answer (the caller may bound it)."""
        ...

    def service(self, name: str) -> Any:
        """A daemon service the tool needs (for example "kernels"), or KeyError."""
        ...


class ToolContextBase:
    """What every ToolContext holds the same way: the task it stands for and that
    task's workspace. The task's own context and the tests' recording one build on
    it and say, ask and find services each their own way."""

    def __init__(self, task_id: str, workspace: Path) -> None:
        self._task_id = task_id
        self._workspace = workspace

    @property
    def task_id(self) -> str:
        return self._task_id

    @property
    def workspace(self) -> Path:
        return self._workspace


class Tool(ABC):
    name: ClassVar[str]
    description: ClassVar[str]
    #: JSON Schema (draft 2020-12) of the arguments object.
    parameters: ClassVar[Mapping[str, Any]]
    category: ClassVar[ToolCategory]
    #: Runs without asking whatever the category's switch says: set only from the
    #: user's own configuration (an MCP server's per-tool `alwaysAllow`), never
    #: from anything a tool or a server says about itself.
    always_allowed: ClassVar[bool] = False

    def approval_text(self, args: Mapping[str, Any]) -> str:
        """The JSON text of the `tool` ask or say that shows this call to a person
        (Roo's ClineSayTool shape: a `tool` key plus the arguments)."""
        import json

        return json.dumps({"tool": self.name, **args})

    async def preview(self, ctx: ToolContext, args: Mapping[str, Any]) -> str:
        """The text of the `tool` ask or say, computed with the task's workspace:
        what a person sees before the call runs. A write tool adds the unified diff
        of its change here, which `approval_text` cannot know. Never raises a
        ToolError (the call itself reports the problem); defaults to `approval_text`."""
        return self.approval_text(args)

    def written_paths(self, args: Mapping[str, Any]) -> list[str]:
        """The paths (as the model gave them) this call would write, so that the
        approval policy can always ask before a write to a protected path."""
        return []

    @abstractmethod
    async def execute(self, ctx: ToolContext, args: Mapping[str, Any]) -> ToolResult: ...
