"""list_variables and describe_variable: the model reads its kernel's variables.

They inspect the task's kernel (the one execute_code runs in) with a silent
snippet (:mod:`hdsp.daemon.kernels.variables`): no execution count, nothing in
the user's history, no output in a notebook, bounded in time and size, and
never queued behind running code. They only read, so they are in the read
category: the name the model gives is data (checked to be an identifier, sent
JSON-encoded), never code.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ClassVar

from hdsp.daemon.kernels import KernelError, KernelService, TaskKernel
from hdsp.daemon.kernels.variables import VariableInspection, is_variable_name
from hdsp.protocol import VariableDetail, VariableList, VariableSummary, format_bytes

from .base import Tool, ToolCategory, ToolContext, ToolError, ToolResult
from .kernel_tools import kernel_service

__all__ = [
    "DescribeVariableTool",
    "ListVariablesTool",
    "render_detail",
    "render_listing",
]


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in text.splitlines())


def _summary_lines(v: VariableSummary) -> list[str]:
    facts = [v.type]
    if v.shape is not None:
        facts.append("shape (" + ", ".join(str(n) for n in v.shape) + ")")
    elif v.length is not None:
        facts.append(f"len {v.length}")
    if v.dtype:
        facts.append(f"dtype {v.dtype}")
    if v.memory is not None:
        facts.append(format_bytes(v.memory))
    lines = [f"{v.name}: " + ", ".join(facts)]
    if v.columns:
        cols = ", ".join(f"{c.name} ({c.dtype})" for c in v.columns)
        more = f", and {v.columns_omitted} more" if v.columns_omitted else ""
        lines.append(f"    columns: {cols}{more}")
    if v.head:
        lines.append(_indent(v.head))
    if v.preview:
        lines.append(_indent(v.preview))
    if v.error:
        lines.append(f"    (could not show: {v.error})")
    return lines


def render_listing(listing: VariableList) -> str:
    """The list as the model reads it."""
    if not listing.variables:
        text = ["The kernel has no variables (modules, functions and classes are not listed)."]
    else:
        text = [line for v in listing.variables for line in _summary_lines(v)]
    if listing.omitted:
        why = {"count": "too many", "size": "the answer's size limit", "time": "the time limit"}
        reason = why.get(listing.truncated or "", "the limits")
        text.append(f"({listing.omitted} more variables not listed: {reason}.)")
    return "\n".join(text)


def render_detail(detail: VariableDetail) -> str:
    lines = _summary_lines(detail.summary)
    for section in detail.sections:
        lines.append(f"-- {section.title}")
        lines.append(section.text)
    return "\n".join(lines)


async def _inspect(
    ctx: ToolContext, inspect: Callable[[KernelService, str], Awaitable[VariableInspection]]
) -> tuple[TaskKernel, VariableInspection]:
    """The task's kernel and what `inspect` (given the service and the kernel's
    id) found in it; a kernel that cannot be had or inspected is a ToolError."""
    service = kernel_service(ctx)
    try:
        kernel = await service.kernel_for_task(ctx.task_id, ctx.workspace)
        return kernel, await inspect(service, kernel.kernel_id)
    except KernelError as exc:
        raise ToolError(exc.message) from None


def _failure(found: VariableInspection) -> ToolError:
    return ToolError(found.message or "The kernel could not be inspected.")


class ListVariablesTool(Tool):
    name: ClassVar[str] = "list_variables"
    description: ClassVar[str] = (
        "List the variables in your Jupyter kernel (the one execute_code runs in): name, "
        "type, shape, memory and a short preview; for data frames the columns with their "
        "dtypes and the first rows. Modules, functions and classes are left out, and names "
        "starting with _ unless include_private is true. It runs nothing of yours and is "
        "cheap: use it to see what data exists before writing code. If the kernel is busy "
        "running code it says so instead of waiting."
    )
    parameters: ClassVar[Mapping[str, Any]] = {
        "type": "object",
        "properties": {
            "include_private": {
                "type": "boolean",
                "description": "Also list names that start with an underscore.",
            },
        },
        "additionalProperties": False,
    }
    category: ClassVar[ToolCategory] = ToolCategory.READ

    async def execute(self, ctx: ToolContext, args: Mapping[str, Any]) -> ToolResult:
        private = bool(args.get("include_private", False))
        kernel, found = await _inspect(
            ctx,
            lambda service, kernel_id: service.list_variables(kernel_id, include_private=private),
        )
        if found.listing is None:
            raise _failure(found)
        header = f"[variables in kernel {kernel.name}]"
        return ToolResult.text("\n".join([header, *kernel.notes, render_listing(found.listing)]))


class DescribeVariableTool(Tool):
    name: ClassVar[str] = "describe_variable"
    description: ClassVar[str] = (
        "Describe one variable of your Jupyter kernel in depth, without running code of "
        "yours: for data frames the dtypes, describe(), null counts and the first rows; for "
        "arrays dtype, shape and statistics; for other objects a bounded repr and their "
        "attributes. Give the variable's name exactly (a Python identifier)."
    )
    parameters: ClassVar[Mapping[str, Any]] = {
        "type": "object",
        "properties": {
            "name": {
                "type": "string",
                "minLength": 1,
                "maxLength": 200,
                "description": "The variable's name, as list_variables shows it.",
            },
        },
        "required": ["name"],
        "additionalProperties": False,
    }
    category: ClassVar[ToolCategory] = ToolCategory.READ

    async def execute(self, ctx: ToolContext, args: Mapping[str, Any]) -> ToolResult:
        name = str(args["name"])
        if not is_variable_name(name):
            raise ToolError(
                f"{name!r} is not a variable name: give one name as list_variables shows it "
                "(a Python identifier, no expressions or attributes)."
            )
        kernel, found = await _inspect(
            ctx, lambda service, kernel_id: service.describe_variable(kernel_id, name)
        )
        if found.detail is None:
            raise _failure(found)
        header = f"[{name} in kernel {kernel.name}]"
        return ToolResult.text("\n".join([header, *kernel.notes, render_detail(found.detail)]))
