"""LangChain on chatmem (extra ``langchain``): :class:`ChatmemChatMessageHistory`, and the
conversions :func:`to_chatmem` and :func:`from_chatmem`. For ``create_agent``, see
:mod:`chatmem.langchain_agent`.

A LangChain message is stored as two things, as the TypeScript package stores it (each reads
what the other wrote):

- the body: the OpenAI projection the model should see. ``human`` is ``user``, ``ai``
  ``assistant``, ``system`` ``system`` (``developer`` when ``additional_kwargs`` has
  ``__openai_role__: "developer"``), ``tool`` ``tool``, a ``ChatMessage`` by its role (``user``
  when chatmem has no such role). Content is a string, or parts: text blocks as text parts;
  for a user, images as ``image_url`` parts, audio and files as OpenAI's ``input_audio`` and
  ``file`` parts; for an assistant, refusals. Blocks a role cannot hold (reasoning, tool calls,
  provider blocks) are left out of the body. An AI message's reasoning
  (``additional_kwargs["reasoning_content"]``, else its reasoning blocks' text) becomes
  ``reasoning_content``, stored and never sent to a model; its tool calls with an id and a name
  become ``tool_calls``; a tool message's ``status="error"`` becomes ``is_error``.
- ``metadata["langchain"] = {"type", "data"}``: ``message_to_dict(message)``, with the fields
  the body holds exactly left out (the content when the body's reproduces it, except a system
  message's; the tool calls when the body's parse back to them; the name; the tool call id;
  empty and ``None`` defaults). Every value must be JSON: anything else raises
  :class:`~chatmem.ConversionError` naming the field, and nothing is written.

Reading, a message with ``metadata["langchain"]`` is rebuilt from it, what it leaves out taken
from the body; when the copy's content does not project to the body's (the server renders the
summary into the system message, or someone edited the body), the body's content wins. A
message without the copy (another client's, or the server's system message holding only the
summary) is converted from the body. chatmem keeps one system message per conversation: a
later one replaces it.

A history given a ``user`` (see :class:`ChatmemChatMessageHistory`) also reads that user's
facts: one ``HumanMessage`` right after the system message, marked with
``additional_kwargs[FACTS_KEY]`` (see :func:`is_facts`). It is what the server sends a model,
never a message of the conversation: writing leaves it out.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import json
import math
import threading
from collections.abc import Callable, Sequence
from typing import Any, cast

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    message_to_dict,
    messages_from_dict,
)
from langchain_core.messages.tool import ToolCall as LCToolCall
from langchain_core.messages.tool import invalid_tool_call, tool_call

from ._facts import window_with_facts
from .client import AsyncClient, Client, Message, Policy, ToolCall, Window
from .errors import ChatmemError, ConversionError, NotFoundError

__all__ = [
    "FACTS_KEY",
    "LANGCHAIN_KEY",
    "ChatmemChatMessageHistory",
    "UnstoredWriteError",
    "from_chatmem",
    "image_block",
    "is_facts",
    "to_chatmem",
]

LANGCHAIN_KEY = "langchain"
"""The key of a chatmem message's ``metadata`` that holds LangChain's copy of the message."""

FACTS_KEY = "chatmem_facts"
"""The ``additional_kwargs`` key (value ``True``) marking the message a user's facts are read in:
chat models leave a human message's ``additional_kwargs`` out of what they send, and it survives
LangChain's serialization (a checkpointer, a trace)."""

_ROLE_KEY = "__openai_role__"  # how langchain-openai marks a developer message
_ABSENT = object()

# ---------------------------------------------------------------------------------------------
# JSON values


def _check_json(value: Any, field: str) -> None:
    """Raises :class:`ConversionError` unless ``value`` comes back from the server as it is."""
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ConversionError(field, "a string with a lone surrogate (not UTF-8)") from e
        return
    if isinstance(value, int):
        if not -(2**63) <= value < 2**64:
            raise ConversionError(field, "an integer outside 64 bits (stored as a float)")
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ConversionError(field, f"the number {value} (JSON has no such number)")
        return
    if isinstance(value, list):
        for i, item in enumerate(value):
            _check_json(item, f"{field}[{i}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ConversionError(field, f"a {type(key).__name__} key (JSON keys are text)")
            _check_json(key, f"{field} key")
            _check_json(item, f"{field}.{key}")
        return
    raise ConversionError(field, f"a {type(value).__name__} (JSON values only)")


# ---------------------------------------------------------------------------------------------
# LangChain -> chatmem: the body


def _text_part(block: Any) -> dict[str, Any] | None:
    if isinstance(block, str):
        return {"type": "text", "text": block}
    if (
        isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    ):
        return {"type": "text", "text": block["text"]}
    return None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _user_part(block: Any) -> dict[str, Any] | None:
    """A user block as OpenAI's part: text, an image, audio or a file; ``None`` for the rest."""
    text = _text_part(block)
    if text is not None or not isinstance(block, dict):
        return text
    meta, extras = _dict(block.get("metadata")), _dict(block.get("extras"))
    data = _str(block.get("data")) or _str(block.get("base64"))
    mime = _str(block.get("mime_type")) or _str(block.get("mimeType"))
    kind = block.get("type")
    if kind == "image_url":
        image = block.get("image_url")
        if isinstance(image, str):
            return {"type": "image_url", "image_url": {"url": image}}
        if isinstance(image, dict) and isinstance(image.get("url"), str):
            url: dict[str, Any] = {"url": image["url"]}
            if isinstance(image.get("detail"), str):
                url["detail"] = image["detail"]
            return {"type": "image_url", "image_url": url}
        return None
    if kind == "image":
        detail = _str(meta.get("detail")) or _str(extras.get("detail")) or _str(block.get("detail"))
        link = _str(block.get("url")) or (f"data:{mime};base64,{data}" if data and mime else None)
        if link is None:
            return None
        image_url: dict[str, Any] = {"url": link}
        if detail is not None:
            image_url["detail"] = detail
        return {"type": "image_url", "image_url": image_url}
    if kind == "input_audio":
        audio = block.get("input_audio")
        if (
            isinstance(audio, dict)
            and isinstance(audio.get("data"), str)
            and isinstance(audio.get("format"), str)
        ):
            return {
                "type": "input_audio",
                "input_audio": {"data": audio["data"], "format": audio["format"]},
            }
        return None
    if kind == "audio":
        formats = {
            "audio/wav": "wav",
            "audio/x-wav": "wav",
            "audio/mp3": "mp3",
            "audio/mpeg": "mp3",
        }
        audio_format = formats.get(mime or "")
        if data is None or audio_format is None:
            return None
        return {"type": "input_audio", "input_audio": {"data": data, "format": audio_format}}
    if kind == "file":
        inner = block.get("file")
        if isinstance(inner, dict):
            file = {k: inner[k] for k in ("file_data", "file_id", "filename") if _str(inner.get(k))}
            return (
                {"type": "file", "file": file} if "file_data" in file or "file_id" in file else None
            )
        if _str(block.get("file_id")):
            return {"type": "file", "file": {"file_id": block["file_id"]}}
        filename = next(
            (
                n
                for n in (block.get("filename"), extras.get("filename"), meta.get("filename"))
                if isinstance(n, str)
            ),
            None,
        )
        if data is None or mime is None or filename is None:
            return None
        return {
            "type": "file",
            "file": {"file_data": f"data:{mime};base64,{data}", "filename": filename},
        }
    return None


def _assistant_part(block: Any) -> dict[str, Any] | None:
    text = _text_part(block)
    if text is not None:
        return text
    if (
        isinstance(block, dict)
        and block.get("type") == "refusal"
        and isinstance(block.get("refusal"), str)
    ):
        return {"type": "refusal", "refusal": block["refusal"]}
    return None


def _project(content: Any, part: Callable[[Any], dict[str, Any] | None]) -> Any:
    if isinstance(content, str):
        return content
    return [p for p in (part(b) for b in content) if p is not None]


def _role(message: BaseMessage, field: str) -> str:
    if isinstance(message, HumanMessage):
        return "user"
    if isinstance(message, AIMessage):
        return "assistant"
    if isinstance(message, ToolMessage):
        return "tool"
    if isinstance(message, SystemMessage):
        developer = message.additional_kwargs.get(_ROLE_KEY) == "developer"
        return "developer" if developer else "system"
    if isinstance(message, ChatMessage):
        role = {"ai": "assistant", "human": "user"}.get(message.role, message.role)
        return role if role in ("system", "developer", "assistant") else "user"
    raise ConversionError(
        f"{field}.type",
        f"{message.type!r} messages cannot be stored in chatmem "
        "(human, ai, system, tool and chat messages only)",
    )


def _reasoning(message: BaseMessage) -> str | None:
    kwarg = message.additional_kwargs.get("reasoning_content")
    if isinstance(kwarg, str):
        return kwarg
    if isinstance(message.content, str):
        return None
    texts = [
        b[b["type"]]
        for b in message.content
        if isinstance(b, dict)
        and b.get("type") in ("reasoning", "thinking")
        and isinstance(b.get(b["type"]), str)
    ]
    return "".join(texts) if texts else None


def _body_tool_calls(message: BaseMessage) -> list[ToolCall]:
    """The tool calls a model can be answered for: those with an id and a name."""
    if not isinstance(message, AIMessage):
        return []
    return [
        {
            "id": cast(str, call["id"]),
            "type": "function",
            "function": {
                "name": call["name"],
                "arguments": json.dumps(call["args"], ensure_ascii=False),
            },
        }
        for call in message.tool_calls
        if call.get("id") and call.get("name")
    ]


def _content_for(role: str, content: Any, has_calls: bool) -> Any:
    """The body's content of ``role`` for LangChain ``content`` (``_ABSENT``: none)."""
    if role == "user":
        return _project(content, _user_part)
    if role == "assistant":
        parts = _project(content, _assistant_part)
        if isinstance(parts, str) or parts:
            return parts
        return _ABSENT if has_calls else ""
    return _project(content, _text_part)


def _body(message: BaseMessage, field: str) -> Message:
    """The OpenAI projection of ``message``, without metadata."""
    role = _role(message, field)
    if not isinstance(message.content, (str, list)):
        raise ConversionError(f"{field}.content", "content is a string or a list of blocks")
    out: dict[str, Any] = {"role": role}
    calls = _body_tool_calls(message)
    content = _content_for(role, message.content, bool(calls))
    if content is not _ABSENT:
        out["content"] = content
    if calls:
        out["tool_calls"] = calls
    if role == "assistant":
        reasoning = _reasoning(message)
        if reasoning is not None:
            out["reasoning_content"] = reasoning
    if isinstance(message, ToolMessage):
        if not isinstance(message.tool_call_id, str) or not message.tool_call_id:
            raise ConversionError(
                f"{field}.tool_call_id", "a tool result needs the id of the call it answers"
            )
        out["tool_call_id"] = message.tool_call_id
        if message.status == "error":
            out["is_error"] = True
    if isinstance(message.name, str):
        out["name"] = message.name
    return cast(Message, out)


def to_chatmem(message: BaseMessage, index: int = 0) -> Message:
    """``message`` as chatmem stores it: the body and ``metadata["langchain"]`` (see the
    module). ``index`` only names the message in errors (``messages[2].content[1]``). Raises
    :class:`~chatmem.ConversionError`."""
    field = f"messages[{index}]"
    body = _body(message, field)
    whole = message_to_dict(message)
    data: dict[str, Any] = whole["data"]
    for key in data:  # the fields themselves: a dump would turn a tuple or a model into JSON
        _check_json(getattr(message, key, data[key]), f"{field}.{key}")
    back = _from_body(body)
    drop = ["name"]
    if back.content == message.content and body["role"] not in ("system", "developer"):
        drop.append("content")
    for key, empty in (
        ("additional_kwargs", {}),
        ("response_metadata", {}),
        ("id", None),
        ("invalid_tool_calls", []),
        ("usage_metadata", None),
        ("artifact", None),
        ("tool_call_chunks", []),
        ("chunk_position", None),
    ):
        if key in data and data[key] == empty:
            drop.append(key)
    if isinstance(message, AIMessage) and cast(AIMessage, back).tool_calls == message.tool_calls:
        drop.append("tool_calls")
    if isinstance(message, ToolMessage):
        drop.append("tool_call_id")
        if message.status == "error":
            drop.append("status")
    kept = {k: copy.deepcopy(v) for k, v in data.items() if k not in drop}
    body["metadata"] = {LANGCHAIN_KEY: {"type": whole["type"], "data": kept}}
    return body


# ---------------------------------------------------------------------------------------------
# chatmem -> LangChain


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


def _from_body(message: Message) -> BaseMessage:
    """A message converted from its body alone."""
    role = message["role"]
    raw = message.get("content")
    content: Any = "" if raw is None else raw if isinstance(raw, str) else [dict(p) for p in raw]
    name = message.get("name")
    if role in ("system", "developer"):
        kwargs = {_ROLE_KEY: "developer"} if role == "developer" else {}
        return SystemMessage(content, name=name, additional_kwargs=kwargs)
    if role == "user":
        return HumanMessage(content, name=name)
    if role == "assistant":
        valid, invalid = _lc_tool_calls(message.get("tool_calls", []))
        extra: dict[str, Any] = {}
        if "reasoning_content" in message:
            extra["reasoning_content"] = message["reasoning_content"]
        return AIMessage(
            content,
            name=name,
            tool_calls=valid,
            invalid_tool_calls=invalid,
            additional_kwargs=extra,
        )
    if role == "tool":
        return ToolMessage(
            content,
            tool_call_id=message.get("tool_call_id", ""),
            name=name,
            status="error" if message.get("is_error") else "success",
        )
    raise ConversionError("role", f"unknown role {role!r}")


_KNOWN_TYPES = {"human", "ai", "system", "tool", "chat"}


def _rebuild(message: Message, *, body_wins: bool = True) -> BaseMessage:
    """``message`` from its LangChain copy when it has one (see the module), else its body.
    ``body_wins=False`` keeps the copy's content even where the body says otherwise."""
    body = _from_body(message)
    held = (message.get("metadata") or {}).get(LANGCHAIN_KEY)
    if not isinstance(held, dict) or not isinstance(held.get("data"), dict):
        return body
    kind = held.get("type")
    if not isinstance(kind, str) or kind.removesuffix("MessageChunk").lower() not in _KNOWN_TYPES:
        return body  # a kind of message this version does not know: the body is what it is
    data: dict[str, Any] = copy.deepcopy(held["data"])
    if "content" in data:
        projected = (
            _content_for(message["role"], data["content"], bool(message.get("tool_calls")))
            if isinstance(data["content"], (str, list))
            else _ABSENT
        )
        if body_wins and projected != message.get("content", _ABSENT):
            data["content"] = body.content
    else:
        data["content"] = body.content
    data["name"] = message.get("name", data.get("name"))
    if isinstance(body, AIMessage) and kind.lower().startswith("ai") and "tool_calls" not in data:
        data["tool_calls"] = body.tool_calls
        data.setdefault("invalid_tool_calls", body.invalid_tool_calls)
    if isinstance(body, ToolMessage) and kind.lower().startswith("tool"):
        data["tool_call_id"] = body.tool_call_id
        data.setdefault("status", body.status)
    if kind.lower().startswith("chat"):
        data.setdefault("role", message["role"])
    try:
        return messages_from_dict([{"type": kind, "data": data}])[0]
    except ValueError as e:
        raise ConversionError(f"metadata.{LANGCHAIN_KEY}", f"not a {kind} message: {e}") from e


def from_chatmem(message: Message) -> BaseMessage:
    """A message the server answered, as LangChain's: rebuilt from ``metadata["langchain"]``
    when it has one (see the module), else converted from the body (``system`` and
    ``developer`` as system messages, ``reasoning_content`` as
    ``additional_kwargs["reasoning_content"]``, tool calls whose arguments are not a JSON
    object as invalid tool calls, ``is_error`` as status ``"error"``)."""
    return _rebuild(message)


def is_facts(message: BaseMessage) -> bool:
    """Whether ``message`` is the facts message a history with a ``user`` reads (never stored:
    the adapters' writes leave it out)."""
    return isinstance(message, HumanMessage) and message.additional_kwargs.get(FACTS_KEY) is True


def facts_message(message: Message) -> HumanMessage:
    """The prompt's facts message as LangChain's, marked (see :data:`FACTS_KEY`)."""
    return HumanMessage(cast(str, message.get("content")), additional_kwargs={FACTS_KEY: True})


def window_messages(window: Window | None, prompt: Sequence[Message] | None) -> list[BaseMessage]:
    """``window`` as LangChain's messages, with the facts message of ``prompt`` (an empty turn's
    prompt for the history's user) where the server sends it (``None``: no user)."""
    return window_with_facts(window, prompt, from_chatmem, facts_message)


def image_block(data: bytes, mime_type: str) -> dict[str, Any]:
    """A user content block for an image given as bytes (a data URL)."""
    encoded = base64.b64encode(data).decode("ascii")
    return {"type": "image_url", "image_url": {"url": f"data:{mime_type};base64,{encoded}"}}


# ---------------------------------------------------------------------------------------------
# The history


class UnstoredWriteError(ChatmemError):
    """An earlier write of the conversation failed and none of it was stored: raised by the next
    read, because ``RunnableWithMessageHistory`` stores a turn from a callback whose errors it
    only logs. ``messages`` are the messages not stored; ``error`` (also ``__cause__``) is why."""

    def __init__(self, conversation_id: str, messages: list[BaseMessage], error: Exception):
        self.conversation_id = conversation_id
        self.messages = messages
        self.error = error
        n = len(messages)
        super().__init__(
            f"an earlier write of {n} message{'' if n == 1 else 's'} to conversation "
            f"{conversation_id!r} was not stored (none of it is in chatmem): {error}"
        )


_Key = tuple[str, str | None, str]
_failed: dict[_Key, UnstoredWriteError] = {}
_failed_lock = threading.Lock()


def _key(client: Client | AsyncClient, conversation: str) -> _Key:
    """Histories are made anew for every call of a chain: the failure is the server's,
    tenant's and conversation's, not one object's."""
    return (client.base_url, client._headers.get("Authorization"), conversation)


class ChatmemChatMessageHistory(BaseChatMessageHistory):
    """One chatmem conversation as LangChain's chat history.

    ``messages`` is the server's window (an unknown conversation is empty); ``add_messages``
    converts every message first (nothing is sent if one cannot be stored) and commits them in
    one request; ``clear`` deletes the conversation. ``client`` defaults to a
    :class:`~chatmem.Client` from ``CHATMEM_URL`` / ``CHATMEM_TOKEN``; with ``async_client``
    the ``a*`` methods use it rather than a thread. ``policy`` is sent with every request.

    ``user`` names the conversation's user (``chatmem serve --facts``): every write is theirs
    (with a facts model, their messages are read for facts), and ``messages`` also holds their
    facts, in one ``HumanMessage`` right after the system message, as the server sends a model
    (:func:`is_facts`; read with a second request, an empty turn's ``POST …/prompt``; a token
    window then holds fewer of its oldest messages, leaving room for them). The facts message
    is never stored: ``add_messages`` leaves it out, so ``RunnableWithMessageHistory`` (which
    writes only each turn's new messages) or a read-modify-write never makes it a message of
    the conversation. The facts are read once a turn: the first read after the history was made
    or last wrote (or cleared) asks the server, and later reads reuse that answer until the
    next write, so the two reads ``RunnableWithMessageHistory`` makes of one turn (it counts
    the first to cut the history off the turn's input) see the same facts even when a facts
    model lands a new one in between. Without ``user`` nothing names a user and no facts are
    read.

    A write that fails raises, calls ``on_error(error, messages)`` first, and is remembered:
    the next read of the conversation (by any history of the same server, token and
    conversation in this process) raises :class:`UnstoredWriteError` once, unless a later
    write succeeded first.
    """

    def __init__(
        self,
        conversation_id: str,
        *,
        client: Client | None = None,
        async_client: AsyncClient | None = None,
        policy: Policy | None = None,
        user: str | None = None,
        on_error: Callable[[Exception, list[BaseMessage]], None] | None = None,
    ) -> None:
        self.conversation_id = conversation_id
        self.client = client or Client()
        self.async_client = async_client
        self.policy = policy
        self.user = user
        self.on_error = on_error
        # The prompt the facts were last read from: kept until the next write (see above).
        self._prompt: list[Message] | None = None

    def _report_failed(self, client: Client | AsyncClient) -> None:
        with _failed_lock:
            failed = _failed.pop(_key(client, self.conversation_id), None)
        if failed is not None:
            raise failed from failed.error

    def _wrote(
        self, client: Client | AsyncClient, error: Exception | None, sent: list[BaseMessage]
    ) -> None:
        key = _key(client, self.conversation_id)
        with _failed_lock:
            if error is None:
                _failed.pop(key, None)
            else:
                _failed[key] = UnstoredWriteError(self.conversation_id, sent, error)
        if error is not None and self.on_error is not None:
            self.on_error(error, sent)

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The window the model should see, system message and summary first (then, with a
        ``user``, their facts). Raises :class:`UnstoredWriteError` if a write of the
        conversation failed since the last read."""
        self._report_failed(self.client)
        window: Window | None = None
        with contextlib.suppress(NotFoundError):
            window = self.client.get_messages(self.conversation_id, policy=self.policy)
        if self.user is not None and self._prompt is None:
            self._prompt = self.client.prompt(
                self.conversation_id, [], policy=self.policy, user=self.user
            ).messages
        return window_messages(window, self._prompt)

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Stores ``messages`` in one atomic commit (the facts message left out)."""
        self._prompt = None
        sent = [m for m in messages if not is_facts(m)]
        if not sent:
            return
        try:
            converted = [to_chatmem(m, i) for i, m in enumerate(sent)]
            self.client.add_messages(
                self.conversation_id, converted, policy=self.policy, user=self.user
            )
        except Exception as e:
            self._wrote(self.client, e, sent)
            raise
        self._wrote(self.client, None, sent)

    def clear(self) -> None:
        """Deletes the conversation (window, history and summary)."""
        self._prompt = None
        with contextlib.suppress(NotFoundError):
            self.client.delete_conversation(self.conversation_id)

    async def aget_messages(self) -> list[BaseMessage]:
        """The window, through ``async_client`` when given."""
        if self.async_client is None:
            return await super().aget_messages()
        self._report_failed(self.async_client)
        window: Window | None = None
        with contextlib.suppress(NotFoundError):
            window = await self.async_client.get_messages(self.conversation_id, policy=self.policy)
        if self.user is not None and self._prompt is None:
            answer = await self.async_client.prompt(
                self.conversation_id, [], policy=self.policy, user=self.user
            )
            self._prompt = answer.messages
        return window_messages(window, self._prompt)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Stores ``messages`` in one atomic commit, through ``async_client`` when given."""
        if self.async_client is None:
            return await super().aadd_messages(messages)
        self._prompt = None
        sent = [m for m in messages if not is_facts(m)]
        if not sent:
            return
        try:
            converted = [to_chatmem(m, i) for i, m in enumerate(sent)]
            await self.async_client.add_messages(
                self.conversation_id, converted, policy=self.policy, user=self.user
            )
        except Exception as e:
            self._wrote(self.async_client, e, sent)
            raise
        self._wrote(self.async_client, None, sent)

    async def aclear(self) -> None:
        """Deletes the conversation, through ``async_client`` when given."""
        if self.async_client is None:
            return await super().aclear()
        self._prompt = None
        with contextlib.suppress(NotFoundError):
            await self.async_client.delete_conversation(self.conversation_id)
