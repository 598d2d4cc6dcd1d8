"""A LlamaIndex chat store kept in chatmem (extra ``llama-index``).

:class:`ChatmemChatStore` is a ``BaseChatStore`` whose keys are chatmem conversation ids, so
``ChatMemoryBuffer`` keeps its messages in chatmem::

    memory = ChatMemoryBuffer.from_defaults(
        chat_store=ChatmemChatStore(client=Client()), chat_store_key="user-42")

``get_messages`` is the server's window (system message and summary first). chatmem appends:
``add_message`` and a ``set_messages`` that extends what the window holds are one atomic commit
each; a ``set_messages`` that rewrites earlier messages, ``delete_message`` and
``delete_last_message`` delete the conversation and write it anew (two requests, not atomic,
and the conversation's history beyond the window is lost).
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import Sequence
from typing import Any

from llama_index.core.base.llms.types import (
    ChatMessage,
    ImageBlock,
    MessageRole,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
)
from llama_index.core.storage.chat_store.base import BaseChatStore
from pydantic import PrivateAttr

from .client import AsyncClient, Client, Message, Policy, ToolCall
from .errors import ConversionError, NotFoundError

__all__ = ["ChatmemChatStore", "from_chatmem", "to_chatmem"]

_ROLES = {
    MessageRole.SYSTEM: "system",
    MessageRole.DEVELOPER: "developer",
    MessageRole.USER: "user",
    MessageRole.ASSISTANT: "assistant",
    MessageRole.TOOL: "tool",
}
# additional_kwargs keys that map to a chatmem field (the rest cannot be stored)
_KWARGS = {"tool_calls", "tool_call_id", "name", "reasoning_content", "is_error"}


def _image_url(block: ImageBlock, field: str) -> dict[str, Any]:
    if block.url is not None:
        url = str(block.url)
    elif block.image is not None and isinstance(block.image, bytes):
        mime = block.image_mimetype or "image/png"
        data = block.image
        try:  # LlamaIndex keeps images base64-encoded once resolved
            base64.b64decode(data, validate=True)
            encoded = data.decode("ascii")
        except ValueError:
            encoded = base64.b64encode(data).decode("ascii")
        url = f"data:{mime};base64,{encoded}"
    else:
        raise ConversionError(field, "an image needs a url or bytes (a path is not stored)")
    image: dict[str, Any] = {"url": url}
    if block.detail:
        image["detail"] = block.detail
    return {"type": "image_url", "image_url": image}


def _openai_tool_call(call: Any, field: str) -> ToolCall:
    """A tool call from ``additional_kwargs["tool_calls"]``: OpenAI's dict or SDK object."""
    if hasattr(call, "model_dump"):
        call = call.model_dump()
    try:
        function = call["function"]
        return {
            "id": str(call["id"]),
            "type": "function",
            "function": {"name": function["name"], "arguments": function["arguments"] or ""},
        }
    except (KeyError, TypeError) as e:
        raise ConversionError(
            field, "a tool call needs id, function.name, function.arguments"
        ) from e


def to_chatmem(message: ChatMessage, index: int = 0) -> Message:
    """``message`` as chatmem stores it; ``index`` only names it in errors. Raises
    :class:`~chatmem.ConversionError` for what chatmem cannot hold."""
    field = f"messages[{index}]"
    role = _ROLES.get(message.role)
    if role is None:
        raise ConversionError(f"{field}.role", f"{message.role.value!r} is not a chatmem role")
    for key in message.additional_kwargs:
        if key not in _KWARGS:
            raise ConversionError(f"{field}.additional_kwargs.{key}", "not stored by chatmem")
    texts: list[str] = []
    parts: list[dict[str, Any]] = []
    calls: list[ToolCall] = []
    reasoning: list[str] = []
    for j, block in enumerate(message.blocks):
        where = f"{field}.blocks[{j}]"
        if isinstance(block, TextBlock):
            texts.append(block.text)
            parts.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageBlock) and role == "user":
            parts.append(_image_url(block, where))
        elif isinstance(block, ToolCallBlock) and role == "assistant":
            if not block.tool_call_id:
                raise ConversionError(f"{where}.tool_call_id", "a tool call needs an id")
            args = block.tool_kwargs
            arguments = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
            calls.append(
                {
                    "id": block.tool_call_id,
                    "type": "function",
                    "function": {"name": block.tool_name, "arguments": arguments},
                }
            )
        elif isinstance(block, ThinkingBlock) and role == "assistant":
            reasoning.append(block.content or "")
        else:
            raise ConversionError(
                where, f"a {block.block_type!r} block cannot be stored in a {role} message"
            )
    kwargs = message.additional_kwargs
    known_ids = {c["id"] for c in calls}
    for j, raw in enumerate(kwargs.get("tool_calls") or []):
        call = _openai_tool_call(raw, f"{field}.additional_kwargs.tool_calls[{j}]")
        if call["id"] not in known_ids:
            calls.append(call)
    if calls and role != "assistant":
        raise ConversionError(f"{field}.additional_kwargs.tool_calls", "only an assistant calls")

    out: Message = {"role": role}  # type: ignore[typeddict-item]
    if role == "user" and any(p["type"] != "text" for p in parts):
        out["content"] = parts
    elif texts or not calls:
        out["content"] = "".join(texts)
    if calls:
        out["tool_calls"] = calls
    if reasoning or "reasoning_content" in kwargs:
        out["reasoning_content"] = "".join(reasoning) or str(kwargs["reasoning_content"])
    if role == "tool":
        if not kwargs.get("tool_call_id"):
            raise ConversionError(
                f"{field}.additional_kwargs.tool_call_id", "a tool result needs it"
            )
        out["tool_call_id"] = str(kwargs["tool_call_id"])
        if kwargs.get("is_error"):
            out["is_error"] = True
    elif "tool_call_id" in kwargs or "is_error" in kwargs:
        raise ConversionError(
            f"{field}.additional_kwargs.tool_call_id", "only a tool result has it"
        )
    if kwargs.get("name"):
        out["name"] = str(kwargs["name"])
    return out


def from_chatmem(message: Message) -> ChatMessage:
    """A message the server answered, as LlamaIndex's ``ChatMessage``."""
    role = MessageRole(message["role"])
    content = message.get("content")
    blocks: list[Any] = []
    if isinstance(content, str):
        blocks.append(TextBlock(text=content))
    elif content:
        for j, part in enumerate(content):
            if part.get("type") == "text":
                blocks.append(TextBlock(text=part["text"]))
            elif part.get("type") == "image_url":
                image = part["image_url"]
                blocks.append(ImageBlock(url=image["url"], detail=image.get("detail")))
            else:
                raise ConversionError(
                    f"content[{j}].type", f"{part.get('type')!r} parts are unread"
                )
    for call in message.get("tool_calls", []):
        arguments = call["function"]["arguments"]
        try:
            args: dict[str, Any] | str = json.loads(arguments) if arguments else {}
        except ValueError:
            args = arguments
        blocks.append(
            ToolCallBlock(
                tool_call_id=call["id"],
                tool_name=call["function"]["name"],
                tool_kwargs=args if isinstance(args, dict) else arguments,
            )
        )
    kwargs: dict[str, Any] = {}
    for key in ("tool_call_id", "name", "reasoning_content", "is_error"):
        if message.get(key) is not None:
            kwargs[key] = message.get(key)
    return ChatMessage(role=role, blocks=blocks, additional_kwargs=kwargs)


def _comparable(message: Message) -> Any:
    """``message`` as LlamaIndex keeps it: without ``metadata`` (which it does not read), and
    with its tool calls' arguments parsed, so re-serialized JSON compares equal."""
    out: dict[str, Any] = dict(message)
    out.pop("metadata", None)
    calls = []
    for call in message.get("tool_calls", []):
        arguments: Any = call["function"]["arguments"]
        with contextlib.suppress(ValueError):
            arguments = json.loads(arguments)
        calls.append((call["id"], call["function"]["name"], arguments))
    out["tool_calls"] = calls
    return out


class ChatmemChatStore(BaseChatStore):
    """LlamaIndex's chat store over chatmem: a key is a conversation id.

    ``client`` defaults to a :class:`~chatmem.Client` from ``CHATMEM_URL`` / ``CHATMEM_TOKEN``;
    with ``async_client`` the ``a*`` methods use it rather than a thread; ``policy`` is sent
    with every request.
    """

    _client: Client = PrivateAttr()
    _async_client: AsyncClient | None = PrivateAttr(default=None)
    _policy: Policy | None = PrivateAttr(default=None)

    def __init__(
        self,
        client: Client | None = None,
        *,
        async_client: AsyncClient | None = None,
        policy: Policy | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._client = client or Client()
        self._async_client = async_client
        self._policy = policy

    @classmethod
    def class_name(cls) -> str:
        """LlamaIndex's name of this store."""
        return "ChatmemChatStore"

    def _convert(self, messages: Sequence[ChatMessage]) -> list[Message]:
        return [to_chatmem(m, i) for i, m in enumerate(messages)]

    def get_messages(self, key: str, **kwargs: Any) -> list[ChatMessage]:
        """The window of conversation ``key`` (empty when there is none)."""
        try:
            window = self._client.get_messages(key, policy=self._policy)
        except NotFoundError:
            return []
        return [from_chatmem(m) for m in window.messages]

    def add_message(self, key: str, message: ChatMessage, idx: int | None = None) -> None:
        """Appends ``message`` (one commit); chatmem cannot insert at ``idx``."""
        if idx is not None:
            raise NotImplementedError("chatmem appends; it cannot insert at an index")
        self._client.add_messages(key, self._convert([message]), policy=self._policy)

    def set_messages(self, key: str, messages: list[ChatMessage]) -> None:
        """Makes ``messages`` the conversation: appends in one commit what follows the current
        window; otherwise deletes the conversation and writes ``messages`` anew."""
        new = self._convert(messages)
        try:
            current = self._client.get_messages(key, policy=self._policy).messages
        except NotFoundError:
            current = []
        if current and [_comparable(m) for m in new[: len(current)]] == [
            _comparable(m) for m in current
        ]:
            if len(new) > len(current):
                self._client.add_messages(key, new[len(current) :], policy=self._policy)
            return
        if current:
            self._delete(key)
        if new:
            self._client.add_messages(key, new, policy=self._policy)

    def _delete(self, key: str) -> None:
        with contextlib.suppress(NotFoundError):
            self._client.delete_conversation(key)

    def delete_messages(self, key: str) -> list[ChatMessage] | None:
        """Deletes conversation ``key``; returns its window, or ``None`` if there was none."""
        messages = self.get_messages(key)
        self._delete(key)
        return messages or None

    def delete_message(self, key: str, idx: int) -> ChatMessage | None:
        """Removes the window's message ``idx`` by rewriting the conversation."""
        messages = self.get_messages(key)
        if not 0 <= idx < len(messages):
            return None
        removed = messages.pop(idx)
        self._delete(key)
        if messages:
            self._client.add_messages(key, self._convert(messages), policy=self._policy)
        return removed

    def delete_last_message(self, key: str) -> ChatMessage | None:
        """Removes the window's last message by rewriting the conversation."""
        return self.delete_message(key, len(self.get_messages(key)) - 1)

    def get_keys(self) -> list[str]:
        """Every conversation id of the client's tenant."""
        return list(self._client.iter_conversations())

    async def aget_messages(self, key: str, **kwargs: Any) -> list[ChatMessage]:
        """The window of ``key``, through ``async_client`` when given."""
        if self._async_client is None:
            return await super().aget_messages(key)
        try:
            window = await self._async_client.get_messages(key, policy=self._policy)
        except NotFoundError:
            return []
        return [from_chatmem(m) for m in window.messages]

    async def async_add_message(
        self, key: str, message: ChatMessage, idx: int | None = None
    ) -> None:
        """Appends ``message`` (one commit), through ``async_client`` when given."""
        if idx is not None:
            raise NotImplementedError("chatmem appends; it cannot insert at an index")
        if self._async_client is None:
            return await super().async_add_message(key, message)
        await self._async_client.add_messages(key, self._convert([message]), policy=self._policy)
