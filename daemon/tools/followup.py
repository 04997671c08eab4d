"""ask_followup_question: the agent asks the user something and waits for the answer.

The question is a `followup` ask whose text is Roo-Code's JSON shape
(`{"question": ..., "suggest": [{"answer": ...}, ...]}`), so a client can offer the
suggestions as buttons. Asking needs no approval (the ask *is* the person's turn);
an unattended task may have the first suggestion chosen after a timeout, which the
task applies to this ask from the approval policy's verdict.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

from hdsp.daemon.conversation import ImageBlock, TextBlock
from hdsp.daemon.llm.images import fit_image, image_block
from hdsp.protocol import Ask, AskResponse

from .base import Tool, ToolCategory, ToolContext, ToolResult

__all__ = ["AskFollowupQuestion", "followup_text"]


def followup_text(question: str, suggestions: list[str]) -> str:
    """The text of a `followup` ask, in Roo-Code's FollowUpData shape."""
    return json.dumps({"question": question, "suggest": [{"answer": s} for s in suggestions]})


def _image(value: str) -> ImageBlock | TextBlock:
    """An answer's image as a content block; clients send data URLs or bare base64
    (taken as PNG), as with user messages."""
    return fit_image(image_block(value))


class AskFollowupQuestion(Tool):
    name: ClassVar[str] = "ask_followup_question"
    description: ClassVar[str] = (
        "Ask the user a question when you cannot go on without their input (an "
        "ambiguous request, a choice only they can make, missing information you "
        "cannot find yourself with the other tools). Offer 2-4 suggested answers when "
        "you can, each a complete answer the user can pick as is; put the most likely "
        "first. Ask one clear question at a time. Returns the user's answer."
    )
    parameters: ClassVar[Mapping[str, Any]] = {
        "type": "object",
        "properties": {
            "question": {"type": "string", "minLength": 1, "description": "The question."},
            "suggestions": {
                "type": "array",
                "items": {"type": "string", "minLength": 1},
                "maxItems": 8,
                "description": "Suggested answers, the most likely first.",
            },
        },
        "required": ["question"],
        "additionalProperties": False,
    }
    category: ClassVar[ToolCategory] = ToolCategory.FOLLOWUP

    @staticmethod
    def suggestions(args: Mapping[str, Any]) -> list[str]:
        """The suggested answers of a call (the approval policy's default answer is
        the first)."""
        return [str(s) for s in args.get("suggestions") or []]

    def approval_text(self, args: Mapping[str, Any]) -> str:
        return followup_text(str(args.get("question", "")), self.suggestions(args))

    async def execute(self, ctx: ToolContext, args: Mapping[str, Any]) -> ToolResult:
        answer = await ctx.ask(Ask.FOLLOWUP, self.approval_text(args))
        text = (answer.text or "").strip()
        images = [_image(value) for value in answer.images]
        if text:
            reply = f"The user answered:\n{text}"
        elif answer.response == AskResponse.YES:
            reply = "The user answered yes."
        elif answer.response == AskResponse.NO:
            reply = "The user answered no."
        else:
            reply = "The user answered without text."
        if images:
            reply += f"\n({len(images)} image{'s' if len(images) != 1 else ''} attached.)"
        content: list[TextBlock | ImageBlock] = [TextBlock(text=reply), *images]
        if answer.context_block is not None:
            # What the answer is about, as a message's context: data, before the answer.
            content.insert(0, TextBlock(text=answer.context_block))
        return ToolResult(content=content)
