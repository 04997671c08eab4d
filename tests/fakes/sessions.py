"""Made-up model requests of the size and shape of a real session, for the
tests and benches that count, send or time a whole history."""

from __future__ import annotations

from hdsp.daemon.conversation import (
    ApiMessage,
    ModelRequest,
    TextBlock,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
)

__all__ = ["data_science_session"]


def data_science_session(turns: int, *, call_prefix: str = "call_") -> ModelRequest:
    """A data-science exchange of `turns` turns: per turn, code in a tool call
    (ids `call_prefix` and the turn's number) and a table of output; 2 x `turns`
    + 1 messages, with one tool."""
    messages = [ApiMessage(role="user", content=[TextBlock(text="Load sales.csv")], ts=1)]
    for i in range(turns):
        code = f"df{i} = pd.read_csv('sales.csv')\ndf{i}.groupby('region').sum()"
        call_id = f"{call_prefix}{i}"
        messages.append(
            ApiMessage(
                role="assistant",
                content=[
                    TextBlock(text=f"Step {i}: grouping by region."),
                    ToolUseBlock(id=call_id, name="execute_code", input={"code": code}),
                ],
                ts=2 * i + 2,
            )
        )
        table = "\n".join(f"region_{r}  {1000 * r + i:>8}  {r * 3.5:.2f}" for r in range(20))
        messages.append(
            ApiMessage(
                role="user",
                content=[ToolResultBlock(tool_use_id=call_id, content=[TextBlock(text=table)])],
                ts=2 * i + 3,
            )
        )
    tool = ToolSpec(
        name="execute_code",
        description="Run Python in the task's kernel.",
        parameters={"type": "object", "properties": {"code": {"type": "string"}}},
    )
    return ModelRequest(system="You are a data scientist.", messages=messages, tools=[tool])
