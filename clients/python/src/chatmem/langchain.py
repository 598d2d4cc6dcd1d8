"""LangChain chat history kept in chatmem (extra ``langchain``).

:class:`ChatmemChatMessageHistory` is a ``BaseChatMessageHistory``: its ``messages`` is the
window the model should see (the system message first, with the summary as the server renders
it), and ``add_messages`` is one atomic commit, so it works inside ``RunnableWithMessageHistory``::

    chain = RunnableWithMessageHistory(
        prompt | model,
        lambda session_id: ChatmemChatMessageHistory(session_id, client=client),
        input_messages_key="question", history_messages_key="history")

:func:`to_chatmem` and :func:`from_chatmem` convert messages: text, images, tool calls and tool
results. What a chatmem message cannot hold raises :class:`~chatmem.ConversionError` naming the
field.
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import Sequence
from typing import Any, cast

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.tool import ToolCall as LCToolCall
from langchain_core.messages.tool import invalid_tool_call, tool_call

from .client import AsyncClient, Client, Message, Policy, ToolCall
from .errors import ConversionError, NotFoundError

__all__ = ["ChatmemChatMessageHistory", "from_chatmem", "to_chatmem"]

_ROLE_KEY = "__openai_role__"  # how langchain-openai marks a developer message
_ARTIFACT_KEY = "langchain_artifact"  # where a ToolMessage's artifact is kept


def _text_only(content: str | list[str | dict[str, Any]], field: str) -> str:
    """Content that must be text: a string, or a list of text blocks (joined, as LangChain's
    ``.text`` does). Tool-call blocks are skipped: ``tool_calls`` carries them."""
    if isinstance(content, str):
        return content
    texts: list[str] = []
    for j, block in enumerate(content):
        if isinstance(block, str):
            texts.append(block)
        elif block.get("type") == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif block.get("type") not in ("tool_use", "tool_call"):
            raise ConversionError(
                f"{field}[{j}]", f"a {block.get('type')!r} block; this role holds text only"
            )
    return "".join(texts)


def _user_part(block: str | dict[str, Any], field: str) -> dict[str, Any]:
    """One user content part in OpenAI's shape."""
    if isinstance(block, str):
        return {"type": "text", "text": block}
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "text": block["text"]}
    if kind == "image_url":
        image = block["image_url"]
        return {
            "type": "image_url",
            "image_url": {"url": image} if isinstance(image, str) else image,
        }
    if kind == "image":  # LangChain's standard block: a URL, or base64 data with a MIME type
        if block.get("url"):
            return {"type": "image_url", "image_url": {"url": block["url"]}}
        data = block.get("base64") or block.get("data")
        mime = block.get("mime_type")
        if isinstance(data, str) and mime:
            return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{data}"}}
        raise ConversionError(field, "an image block needs a url, or base64 data and mime_type")
    if kind in ("input_audio", "file"):  # OpenAI's own parts: the server keeps them as sent
        return dict(block)
    raise ConversionError(f"{field}.type", f"{kind!r} content blocks cannot be stored in chatmem")


def _tool_calls(message: AIMessage, field: str) -> list[ToolCall]:
    if message.invalid_tool_calls:
        raise ConversionError(f"{field}.invalid_tool_calls", "unparsed tool calls are not stored")
    calls: list[ToolCall] = []
    for j, call in enumerate(message.tool_calls):
        if not call.get("id"):
            raise ConversionError(f"{field}.tool_calls[{j}].id", "a tool call needs an id")
        arguments = json.dumps(call["args"], ensure_ascii=False)
        calls.append(
            {
                "id": cast(str, call["id"]),
                "type": "function",
                "function": {"name": call["name"], "arguments": arguments},
            }
        )
    return calls


def to_chatmem(message: BaseMessage, index: int = 0) -> Message:
    """``message`` as chatmem stores it; ``index`` only names it in errors
    (``messages[2].content[1]``). Raises :class:`~chatmem.ConversionError`."""
    field = f"messages[{index}]"
    out: Message
    if isinstance(message, SystemMessage):
        role = "developer" if message.additional_kwargs.get(_ROLE_KEY) == "developer" else "system"
        text = _text_only(message.content, f"{field}.content")
        out = {"role": role, "content": text}  # type: ignore[typeddict-item]
    elif isinstance(message, HumanMessage):
        content = message.content
        if isinstance(content, str):
            out = {"role": "user", "content": content}
        else:
            parts = [_user_part(b, f"{field}.content[{j}]") for j, b in enumerate(content)]
            out = {"role": "user", "content": parts}
    elif isinstance(message, AIMessage):
        out = {"role": "assistant"}
        text = _text_only(message.content, f"{field}.content")
        calls = _tool_calls(message, field)
        if text or not calls:
            out["content"] = text
        if calls:
            out["tool_calls"] = calls
        reasoning = message.additional_kwargs.get("reasoning_content")
        if isinstance(reasoning, str):
            out["reasoning_content"] = reasoning
    elif isinstance(message, ToolMessage):
        out = {
            "role": "tool",
            "tool_call_id": message.tool_call_id,
            "content": _text_only(message.content, f"{field}.content"),
        }
        if message.status == "error":
            out["is_error"] = True
        if message.artifact is not None:
            try:
                json.dumps(message.artifact)
            except (TypeError, ValueError) as e:
                raise ConversionError(f"{field}.artifact", "only a JSON value is stored") from e
            out["metadata"] = {_ARTIFACT_KEY: message.artifact}
    elif isinstance(message, ChatMessage) and message.role in ("system", "developer", "user"):
        return to_chatmem(_chat_message(message), index)
    else:
        raise ConversionError(
            f"{field}.type", f"{message.type!r} messages cannot be stored in chatmem"
        )
    if message.name:
        out["name"] = message.name
    return out


def _chat_message(message: ChatMessage) -> BaseMessage:
    if message.role == "user":
        return HumanMessage(message.content, name=message.name)
    kwargs = {_ROLE_KEY: "developer"} if message.role == "developer" else {}
    return SystemMessage(message.content, name=message.name, additional_kwargs=kwargs)


def _lc_tool_calls(calls: list[ToolCall]) -> tuple[list[LCToolCall], list[Any]]:
    valid: list[LCToolCall] = []
    invalid: list[Any] = []
    for call in calls:
        name, arguments = call["function"]["name"], call["function"]["arguments"]
        try:
            args = json.loads(arguments) if arguments else {}
        except ValueError:
            args = None
        if isinstance(args, dict):
            valid.append(tool_call(name=name, args=args, id=call["id"]))
        else:  # a model wrote arguments that are not a JSON object: kept as LangChain does
            invalid.append(invalid_tool_call(name=name, args=arguments, id=call["id"], error=None))
    return valid, invalid


def from_chatmem(message: Message) -> BaseMessage:
    """A message the server answered, as LangChain's message of its role."""
    role = message["role"]
    content = message.get("content")
    name = message.get("name")
    if role in ("system", "developer"):
        kwargs = {_ROLE_KEY: "developer"} if role == "developer" else {}
        return SystemMessage(cast(str, content), name=name, additional_kwargs=kwargs)
    if role == "user":
        user: str | list[str | dict[str, Any]] = (
            content if isinstance(content, str) else list(content or [])
        )
        return HumanMessage(user, name=name)
    if role == "assistant":
        valid, invalid = _lc_tool_calls(message.get("tool_calls", []))
        extra: dict[str, Any] = {}
        if "reasoning_content" in message:
            extra["reasoning_content"] = message["reasoning_content"]
        return AIMessage(
            cast(str, content or ""),
            name=name,
            tool_calls=valid,
            invalid_tool_calls=invalid,
            additional_kwargs=extra,
        )
    if role == "tool":
        metadata = message.get("metadata") or {}
        return ToolMessage(
            cast(str, content),
            tool_call_id=message.get("tool_call_id", ""),
            name=name,
            status="error" if message.get("is_error") else "success",
            artifact=metadata.get(_ARTIFACT_KEY),
        )
    raise ConversionError("role", f"unknown role {role!r}")


def image_block(data: bytes, mime_type: str) -> dict[str, Any]:
    """A user content block for an image given as bytes (a data URL), which chatmem stores."""
    encoded = base64.b64encode(data).decode("ascii")
    return {"type": "image_url", "image_url": {"url": f"data:{mime_type};base64,{encoded}"}}


class ChatmemChatMessageHistory(BaseChatMessageHistory):
    """One chatmem conversation as LangChain's chat history.

    ``messages`` is the server's window (an unknown conversation is empty); ``add_messages``
    converts every message first (nothing is sent if one cannot be stored) and commits them
    in one request; ``clear`` deletes the conversation. ``client`` defaults to a
    :class:`~chatmem.Client` from ``CHATMEM_URL`` / ``CHATMEM_TOKEN``; with ``async_client``
    the ``a*`` methods use it rather than a thread. ``policy`` is sent with every request.
    """

    def __init__(
        self,
        conversation_id: str,
        *,
        client: Client | None = None,
        async_client: AsyncClient | None = None,
        policy: Policy | None = None,
    ) -> None:
        self.conversation_id = conversation_id
        self.client = client or Client()
        self.async_client = async_client
        self.policy = policy

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The window the model should see, system message and summary first."""
        try:
            window = self.client.get_messages(self.conversation_id, policy=self.policy)
        except NotFoundError:
            return []
        return [from_chatmem(m) for m in window.messages]

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Stores ``messages`` in one atomic commit."""
        converted = [to_chatmem(m, i) for i, m in enumerate(messages)]
        if converted:
            self.client.add_messages(self.conversation_id, converted, policy=self.policy)

    def clear(self) -> None:
        """Deletes the conversation (window, history and summary)."""
        with contextlib.suppress(NotFoundError):
            self.client.delete_conversation(self.conversation_id)

    async def aget_messages(self) -> list[BaseMessage]:
        """The window, through ``async_client`` when given."""
        if self.async_client is None:
            return await super().aget_messages()
        try:
            window = await self.async_client.get_messages(self.conversation_id, policy=self.policy)
        except NotFoundError:
            return []
        return [from_chatmem(m) for m in window.messages]

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Stores ``messages`` in one atomic commit, through ``async_client`` when given."""
        if self.async_client is None:
            return await super().aadd_messages(messages)
        converted = [to_chatmem(m, i) for i, m in enumerate(messages)]
        if converted:
            await self.async_client.add_messages(
                self.conversation_id, converted, policy=self.policy
            )

    async def aclear(self) -> None:
        """Deletes the conversation, through ``async_client`` when given."""
        if self.async_client is None:
            return await super().aclear()
        with contextlib.suppress(NotFoundError):
            await self.async_client.delete_conversation(self.conversation_id)
