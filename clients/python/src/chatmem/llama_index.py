"""LlamaIndex over chatmem (extra ``llama-index``).

:class:`ChatmemMemory` is a ``BaseMemory`` over one conversation, for today's agents
(``FunctionAgent``, ``AgentWorkflow``: ``run(..., memory=...)``) and chat engines
(``SimpleChatEngine.from_defaults(memory=...)``). :class:`ChatmemChatStore` is a
``BaseChatStore`` whose keys are conversation ids, for ``ChatMemoryBuffer``.

A ``ChatMessage`` is stored as what a model should see, OpenAI's chat-completions message: text
blocks as text parts (one block: a string), a user's images, audio and documents as
``image_url``, ``input_audio`` and ``file`` parts, thinking as ``reasoning_content`` (kept,
never sent to a model), tool calls (blocks and ``additional_kwargs["tool_calls"]``) as
``tool_calls``, ``additional_kwargs`` ``tool_call_id`` and ``name`` as those fields. What a
role cannot hold (an assistant's image, an image by path, a video, a cache point, a citation)
is left out of it. When the body alone does not give the message back,
``metadata["llama_index"]`` keeps the rest: each block the body does not carry whole, and
``additional_kwargs`` (JSON values, bytes, tuples, and pydantic models of ``llama_index`` and
``openai``; anything else raises :class:`~chatmem.ConversionError`). Reading rebuilds a message
equal to the one written (a file object in a block comes back as its bytes). A message without
that copy (written by another client, or the server's summary) is converted from its body; one
whose body is not what its copy projects to (changed by another writer) is read from the body
alone: the body wins.

chatmem keeps one system (or developer) message per conversation, the last written, and reads
it first. The LlamaIndex roles ``chatbot`` and ``model`` are stored as assistants, ``function``
as a tool result (it needs ``additional_kwargs["tool_call_id"]``, as a ``tool`` message does).

A :class:`ChatmemMemory` given a ``user`` also reads that user's facts, in a
:class:`FactsMessage` right after the system message: what the server sends a model, never a
message of the conversation (writing leaves it out).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import importlib
import json
import math
from collections.abc import Iterable, Sequence
from io import IOBase
from pathlib import Path, PurePath
from typing import Any, get_args

from llama_index.core.base.llms.types import (
    AudioBlock,
    ChatMessage,
    ContentBlock,
    DocumentBlock,
    ImageBlock,
    MessageRole,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
)
from llama_index.core.memory.types import BaseMemory
from llama_index.core.storage.chat_store.base import BaseChatStore
from pydantic import AnyUrl, BaseModel, PrivateAttr

from ._facts import window_with_facts
from .client import AsyncClient, Client, Message, Policy, ToolCall, Window
from .errors import ConversionError, NotFoundError

__all__ = ["ChatmemChatStore", "ChatmemMemory", "FactsMessage", "from_chatmem", "to_chatmem"]

METADATA_KEY = "llama_index"
"""The ``metadata`` key holding what rebuilds a ``ChatMessage`` exactly."""

_ROLES = {
    MessageRole.SYSTEM: "system",
    MessageRole.DEVELOPER: "developer",
    MessageRole.USER: "user",
    MessageRole.ASSISTANT: "assistant",
    MessageRole.TOOL: "tool",
    MessageRole.FUNCTION: "tool",
    MessageRole.CHATBOT: "assistant",
    MessageRole.MODEL: "assistant",
}
_BLOCKS: dict[str, type[BaseModel]] = {
    cls.model_fields["block_type"].default: cls for cls in get_args(get_args(ContentBlock)[0])
}
_TYPES_MODULE = TextBlock.__module__
# Models of other packages are rebuilt only from these: a stored class name is never imported
# from anywhere else.
_MODEL_PACKAGES = ("llama_index.", "openai.")
_JSON_INT = range(-(2**63), 2**64)  # what the server keeps as an integer (else a float)

_JsonPath = list[str | int]


# ---------------------------------------------------------------------------------------------
# Python values <-> JSON, with a side list of [path, tag] for what JSON cannot say


class _Encoder:
    def __init__(self, field: str) -> None:
        self.field = field
        self.types: list[list[Any]] = []

    def _where(self, path: _JsonPath) -> str:
        return self.field + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)

    def encode(self, value: Any, path: _JsonPath) -> Any:
        kind = type(value)
        if value is None or kind in (str, bool):
            return value
        if kind is int:
            if value in _JSON_INT:
                return value
            self.types.append([path, "int"])
            return str(value)
        if kind is float:
            if math.isfinite(value):
                return value
            self.types.append([path, "float"])
            return repr(value)
        if kind is bytes or isinstance(value, IOBase):
            if isinstance(value, IOBase):  # a file object comes back as its bytes
                value.seek(0)
                value = value.read()
            self.types.append([path, "bytes"])
            return base64.b64encode(value).decode("ascii")
        if kind in (list, tuple):
            if kind is tuple:
                self.types.append([path, "tuple"])
            return [self.encode(v, [*path, i]) for i, v in enumerate(value)]
        if kind is dict:
            return self._object(value.items(), path)
        if isinstance(value, BaseModel):
            self.types.append([path, _model_tag(type(value), self._where(path))])
            return self._object(_model_fields(value), path)
        if isinstance(value, AnyUrl):
            self.types.append([path, "url"])
            return str(value)
        if isinstance(value, PurePath):
            self.types.append([path, "path"])
            return str(value)
        raise ConversionError(
            self._where(path),
            f"a {kind.__name__} is not stored (JSON values, bytes, tuples and pydantic models "
            "of llama_index and openai are)",
        )

    def _object(self, items: Iterable[tuple[Any, Any]], path: _JsonPath) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if type(key) is not str:
                raise ConversionError(
                    self._where([*path, repr(key)]), "a key that is not text is not stored"
                )
            out[key] = self.encode(value, [*path, key])
        return out


def _model_fields(model: BaseModel) -> list[tuple[str, Any]]:
    fields = [(name, getattr(model, name)) for name in type(model).model_fields]
    return fields + list((model.__pydantic_extra__ or {}).items())


def _model_tag(cls: type[BaseModel], where: str) -> str:
    if cls.__module__ == _TYPES_MODULE:
        return f"m:{cls.__qualname__}"
    if cls.__module__.startswith(_MODEL_PACKAGES):
        return f"m:{cls.__module__}:{cls.__qualname__}"
    raise ConversionError(
        where,
        f"a {cls.__qualname__} ({cls.__module__}) is not stored: only pydantic models "
        "of llama_index and openai are rebuilt",
    )


def _model_class(tag: str) -> type[BaseModel]:
    module, _, name = tag[2:].rpartition(":")
    module = module or _TYPES_MODULE
    if not module.startswith(_MODEL_PACKAGES):
        raise ValueError(f"a model of {module} is not rebuilt")
    found: Any = importlib.import_module(module)
    for part in name.split("."):
        found = getattr(found, part)
    if not (isinstance(found, type) and issubclass(found, BaseModel)):
        raise ValueError(f"{tag} is not a pydantic model")
    return found


def _decode(value: Any, path: tuple[str | int, ...], tags: dict[tuple[Any, ...], str]) -> Any:
    if isinstance(value, list):
        value = [_decode(v, (*path, i), tags) for i, v in enumerate(value)]
    elif isinstance(value, dict):
        value = {k: _decode(v, (*path, k), tags) for k, v in value.items()}
    tag = tags.get(path)
    if tag is None:
        return value
    if tag == "int":
        return int(value)
    if tag == "float":
        return float(value)
    if tag == "bytes":
        return base64.b64decode(value, validate=True)
    if tag == "tuple":
        return tuple(value)
    if tag == "url":
        return AnyUrl(value)
    if tag == "path":
        return Path(value)
    if tag.startswith("m:"):
        return _model_class(tag).model_construct(**value)
    raise ValueError(f"unknown tag {tag!r}")


# ---------------------------------------------------------------------------------------------
# A block's part of the body, and the fields that part gives back


def _b64(data: bytes) -> str:
    """``data`` as base64 text: LlamaIndex keeps binary data base64-encoded once validated."""
    try:
        base64.b64decode(data, validate=True)
        return data.decode("ascii")
    except (binascii.Error, ValueError):
        return base64.b64encode(data).decode("ascii")


def _data_url_payload(url: str) -> bytes:
    head, sep, data = url.partition(";base64,")
    if not (sep and head.startswith("data:")):
        raise ValueError("not a base64 data URL")
    return data.encode("ascii")


def _project(block: Any, role: str) -> dict[str, Any] | None:
    """The content part ``block`` becomes in a ``role`` message; ``None``: none (the copy
    keeps the block)."""
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if role != "user":
        return None
    if isinstance(block, ImageBlock):
        if block.url is not None:
            image: dict[str, Any] = {"url": str(block.url)}
        elif isinstance(block.image, bytes) and block.image:
            mime = block.image_mimetype or "image/png"
            image = {"url": f"data:{mime};base64,{_b64(block.image)}"}
        else:
            return None  # a path is the reader's to resolve; the copy keeps it
        if block.detail:
            image["detail"] = block.detail
        return {"type": "image_url", "image_url": image}
    if isinstance(block, AudioBlock) and isinstance(block.audio, bytes) and block.audio:
        audio = {"data": _b64(block.audio)}
        if block.format:
            audio["format"] = block.format
        return {"type": "input_audio", "input_audio": audio}
    if isinstance(block, DocumentBlock) and isinstance(block.data, bytes) and block.data:
        mime = block.document_mimetype or "application/octet-stream"
        file = {"filename": block.title, "file_data": f"data:{mime};base64,{_b64(block.data)}"}
        return {"type": "file", "file": file}
    return None


# The fields of a block kind that its content part may give back.
_FROM_PART = {
    "text": ("text",),
    "image": ("url", "image"),
    "audio": ("audio",),
    "document": ("data",),
}


def _restore(kind: str, part: dict[str, Any], fields: Iterable[str]) -> dict[str, Any]:
    """Those of ``fields`` that ``part`` gives back to a ``kind`` block (the inverse of
    :func:`_project`, one field at a time; a field it does not hold is left out)."""
    out: dict[str, Any] = {}
    for name in fields:
        if kind == "text":
            out[name] = part["text"]
        elif kind == "image" and name == "url":
            out[name] = AnyUrl(part["image_url"]["url"])
        elif kind == "image":
            with contextlib.suppress(ValueError):  # an image's URL, not its data
                out[name] = _data_url_payload(part["image_url"]["url"])
        elif kind == "audio":
            out[name] = part["input_audio"]["data"].encode("ascii")
        else:
            out[name] = _data_url_payload(part["file"]["file_data"])
    return out


def _call(block: ToolCallBlock) -> tuple[ToolCall, str] | None:
    """``block`` as a tool call of the body and how its arguments come back ("call": the
    text, "json-call": parsed); ``None``: the body cannot hold it."""
    if not block.tool_call_id or not block.tool_name:
        return None
    args = block.tool_kwargs
    if isinstance(args, str):
        arguments, mark = args, "call"
    else:
        try:
            arguments = json.dumps(args, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError):
            return None
        if json.loads(arguments) != args:
            return None
        mark = "json-call"
    call: ToolCall = {
        "id": block.tool_call_id,
        "type": "function",
        "function": {"name": block.tool_name, "arguments": arguments},
    }
    return call, mark


def _openai_tool_call(raw: Any) -> ToolCall | None:
    """A tool call of ``additional_kwargs["tool_calls"]`` (OpenAI's dict or SDK object)."""
    if isinstance(raw, BaseModel):
        raw = raw.model_dump()
    try:
        function = raw["function"]
        call: ToolCall = {
            "id": raw["id"],
            "type": "function",
            "function": {"name": function["name"], "arguments": function["arguments"] or ""},
        }
    except (KeyError, TypeError):
        return None
    ok = all(isinstance(v, str) for v in (call["id"], *call["function"].values()))
    return call if ok and call["id"] and call["function"]["name"] else None


# ---------------------------------------------------------------------------------------------
# ChatMessage <-> chatmem message


def to_chatmem(message: ChatMessage, index: int = 0) -> Message:
    """``message`` as chatmem stores it (the body, and the copy in ``metadata``); ``index``
    only names it in errors. Raises :class:`~chatmem.ConversionError` for what chatmem cannot
    hold: a tool result without ``additional_kwargs["tool_call_id"]``, a value of
    ``additional_kwargs`` that is not stored."""
    field = f"messages[{index}]"
    role = _ROLES[message.role]
    kwargs = message.additional_kwargs
    enc = _Encoder(field)
    parts: list[dict[str, Any]] = []
    calls: list[ToolCall] = []
    reasoning: list[str] = []
    entries: list[dict[str, Any]] = []
    for j, block in enumerate(message.blocks):
        path: _JsonPath = ["blocks", j]
        restored: dict[str, Any] = {}
        mark: str | None = None
        part = _project(block, role)
        if part is not None:
            parts.append(part)
            mark = "part"
            given = [f for f in _FROM_PART[block.block_type] if getattr(block, f) is not None]
            back = _restore(block.block_type, part, given)
            restored = {f: v for f, v in back.items() if v == getattr(block, f)}
        elif isinstance(block, ToolCallBlock) and role == "assistant":
            found = _call(block)
            if found is not None:
                call, mark = found
                calls.append(call)
                restored = {"tool_call_id": block.tool_call_id, "tool_name": block.tool_name}
                restored["tool_kwargs"] = block.tool_kwargs
        elif isinstance(block, ThinkingBlock) and role == "assistant" and block.content is not None:
            reasoning.append(block.content)
            restored, mark = {"content": block.content}, "reasoning"
        entry = {
            name: enc.encode(value, [*path, name])
            for name, value in _model_fields(block)
            if name not in restored
        }
        if mark:
            entry["@"] = mark
        if mark == "reasoning":
            entry["@n"] = len(restored["content"])
        entries.append(entry)

    out: Message = {"role": role}  # type: ignore[typeddict-item]
    copied = dict(kwargs)
    if role == "assistant":
        ids = {c["id"] for c in calls}
        raw_calls = kwargs.get("tool_calls")
        for raw in raw_calls if isinstance(raw_calls, list) else []:
            call_ = _openai_tool_call(raw)
            if call_ is not None and call_["id"] not in ids:
                ids.add(call_["id"])
                calls.append(call_)
    if len(parts) == 1 and parts[0]["type"] == "text":
        out["content"] = parts[0]["text"]
    elif parts:
        out["content"] = parts
    elif not calls:
        out["content"] = ""
    if calls:
        out["tool_calls"] = calls
    if reasoning:
        out["reasoning_content"] = "".join(reasoning)
    elif role == "assistant" and isinstance(kwargs.get("reasoning_content"), str):
        out["reasoning_content"] = kwargs["reasoning_content"]
    if role == "tool":
        tool_call_id = kwargs.get("tool_call_id")
        if not isinstance(tool_call_id, str) or not tool_call_id:
            raise ConversionError(
                f"{field}.additional_kwargs.tool_call_id", "a tool result needs one (a str)"
            )
        out["tool_call_id"] = tool_call_id
        del copied["tool_call_id"]
        if kwargs.get("is_error") is True:
            out["is_error"] = True
    name = kwargs.get("name")
    if isinstance(name, str) and name:
        out["name"] = name
        del copied["name"]

    with contextlib.suppress(ConversionError, ValueError, TypeError, KeyError):
        if _from_body(out) == message:
            return out  # the body alone gives it back: no copy
    copy: dict[str, Any] = {"blocks": entries}
    if copied:
        copy["additional_kwargs"] = enc.encode(copied, ["additional_kwargs"])
    if message.role.value != role:
        copy["role"] = message.role.value
    if enc.types:
        copy["types"] = enc.types
    out["metadata"] = {METADATA_KEY: copy}
    return out


def _body(message: Message) -> dict[str, Any]:
    return {k: v for k, v in message.items() if k != "metadata"}


def _rebuild(message: Message, copy: Any) -> ChatMessage | None:
    """The message ``copy`` rebuilds, or ``None`` when it is not the body's copy."""
    try:
        tags = {tuple(path): tag for path, tag in copy.get("types", [])}
        content = message.get("content")
        parts = iter(
            [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        )
        calls = iter(message.get("tool_calls", []))
        reasoning = message.get("reasoning_content") or ""
        blocks = []
        for j, entry in enumerate(copy["blocks"]):
            fields = {
                k: _decode(v, ("blocks", j, k), tags) for k, v in entry.items() if k[0] != "@"
            }
            kind, mark = fields["block_type"], entry.get("@")
            if mark == "part":
                missing = [f for f in _FROM_PART[kind] if f not in fields]
                fields.update(_restore(kind, next(parts), missing))
            elif mark in ("call", "json-call"):
                call = next(calls)
                args = call["function"]["arguments"]
                fields["tool_call_id"] = call["id"]
                fields["tool_name"] = call["function"]["name"]
                fields["tool_kwargs"] = json.loads(args) if mark == "json-call" else args
            elif mark == "reasoning":
                n = entry["@n"]
                fields["content"], reasoning = reasoning[:n], reasoning[n:]
            blocks.append(_BLOCKS[kind].model_construct(**fields))
        kwargs = _decode(copy.get("additional_kwargs", {}), ("additional_kwargs",), tags)
        if message["role"] == "tool":
            kwargs["tool_call_id"] = message["tool_call_id"]
        if "name" in message:
            kwargs["name"] = message["name"]
        rebuilt = ChatMessage.model_construct(
            role=MessageRole(copy.get("role", message["role"])),
            additional_kwargs=kwargs,
            blocks=blocks,
        )
        if _body(to_chatmem(rebuilt)) != _body(message):
            return None  # the body changed after the copy was written: the body wins
        return rebuilt
    except (KeyError, TypeError, ValueError, AttributeError, StopIteration, ConversionError):
        return None


def from_chatmem(message: Message) -> ChatMessage:
    """A message the server answered, as LlamaIndex's ``ChatMessage``: the one written, when
    its copy is in ``metadata``; else converted from the body. Raises
    :class:`~chatmem.ConversionError` for a content part LlamaIndex has no block for."""
    copy = (message.get("metadata") or {}).get(METADATA_KEY)
    if isinstance(copy, dict):
        rebuilt = _rebuild(message, copy)
        if rebuilt is not None:
            return rebuilt
    return _from_body(message)


def _from_body(message: Message) -> ChatMessage:
    blocks: list[Any] = []
    if message.get("reasoning_content") is not None:
        blocks.append(ThinkingBlock(content=message["reasoning_content"]))
    content = message.get("content")
    if isinstance(content, str):
        blocks.append(TextBlock(text=content))
    for j, part in enumerate(content if isinstance(content, list) else []):
        kind = part.get("type")
        if kind == "text":
            blocks.append(TextBlock(text=part["text"]))
        elif kind == "refusal":
            blocks.append(TextBlock(text=part["refusal"]))
        elif kind == "image_url":
            image = part["image_url"]
            blocks.append(ImageBlock(url=image["url"], detail=image.get("detail")))
        elif kind == "input_audio":
            audio = part["input_audio"]
            blocks.append(AudioBlock(audio=audio["data"].encode(), format=audio.get("format")))
        elif kind == "file" and "file_data" in part.get("file", {}):
            file = part["file"]
            blocks.append(
                DocumentBlock(data=_data_url_payload(file["file_data"]), title=file.get("filename"))
            )
        else:
            raise ConversionError(f"content[{j}].type", f"{kind!r} parts are not read")
    for call in message.get("tool_calls", []):
        arguments = call["function"]["arguments"]
        args: Any = arguments
        with contextlib.suppress(ValueError):
            args = json.loads(arguments) if arguments else {}
        blocks.append(
            ToolCallBlock(
                tool_call_id=call["id"],
                tool_name=call["function"]["name"],
                tool_kwargs=args if isinstance(args, dict) else arguments,
            )
        )
    kwargs: dict[str, Any] = {}
    for key in ("tool_call_id", "name", "is_error"):
        if message.get(key) is not None:
            kwargs[key] = message.get(key)
    return ChatMessage(role=MessageRole(message["role"]), blocks=blocks, additional_kwargs=kwargs)


class FactsMessage(ChatMessage):
    """The user message a user's facts are read in (:class:`ChatmemMemory` with a ``user``):
    a ``ChatMessage`` to a model, which it is sent as; never stored, the memory's writes leave
    it out."""


def _stored(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """``messages`` without the facts message, which is the server's and never stored."""
    return [m for m in messages if not isinstance(m, FactsMessage)]


def _convert(messages: Sequence[ChatMessage]) -> list[Message]:
    return [to_chatmem(m, i) for i, m in enumerate(_stored(messages))]


def _facts_message(facts: Message) -> ChatMessage:
    return FactsMessage(role=MessageRole.USER, blocks=[TextBlock(text=str(facts.get("content")))])


def _window_messages(window: Window | None, prompt: Sequence[Message] | None) -> list[ChatMessage]:
    """``window`` as LlamaIndex's messages, with the facts message of ``prompt`` (an empty
    turn's prompt for the memory's user; ``None``: no user) where the server sends it."""
    return window_with_facts(window, prompt, from_chatmem, _facts_message)


# ---------------------------------------------------------------------------------------------
# Memory


class ChatmemMemory(BaseMemory):
    """LlamaIndex's memory over one chatmem conversation, ``conversation_id``.

    ``get`` is the server's window (system message and summary first, bounded by ``policy``
    or the server's), ``get_all`` everything stored (``/history``, page by page). ``put``,
    ``put_messages`` and their ``a*`` twins are one atomic commit each. ``set`` appends what
    follows when the messages begin with everything stored; otherwise it deletes the
    conversation (history and summary too) and writes the messages anew: two requests, not
    atomic. ``reset`` deletes the conversation. ``client`` defaults to a
    :class:`~chatmem.Client` from ``CHATMEM_URL`` / ``CHATMEM_TOKEN``; with ``async_client``
    the ``a*`` methods use it rather than a thread. A refused write raises.

    ``user`` names the conversation's user (``chatmem serve --facts``): every write is theirs
    (with a facts model, their messages are read for facts), and ``get`` also holds their facts,
    in one :class:`FactsMessage` right after the system message, as the server sends a model
    (read with a second request, an empty turn's ``POST …/prompt``; a token window then holds
    fewer of its oldest messages, leaving room for them). The facts message is never stored:
    ``put``, ``put_messages`` and ``set`` leave it out, so an agent that writes back what it
    read stores its messages only. ``get_all`` is what is stored, without facts. Without
    ``user`` nothing names a user and no facts are read.
    """

    conversation_id: str
    user: str | None = None
    _client: Client = PrivateAttr()
    _async_client: AsyncClient | None = PrivateAttr(default=None)
    _policy: Policy | None = PrivateAttr(default=None)

    def __init__(
        self,
        conversation_id: str,
        client: Client | None = None,
        *,
        async_client: AsyncClient | None = None,
        policy: Policy | None = None,
        user: str | None = None,
    ) -> None:
        super().__init__(**{"conversation_id": conversation_id, "user": user})
        self._client = client or Client()
        self._async_client = async_client
        self._policy = policy

    @classmethod
    def class_name(cls) -> str:
        """LlamaIndex's name of this memory."""
        return "ChatmemMemory"

    @classmethod
    def from_defaults(cls, **kwargs: Any) -> ChatmemMemory:
        """``ChatmemMemory(conversation_id, client, async_client=, policy=, user=)``; with
        ``chat_history``, :meth:`set` to it."""
        history = kwargs.pop("chat_history", None)
        memory = cls(**kwargs)
        if history is not None:
            memory.set(history)
        return memory

    # reading

    def get(self, input: str | None = None, **kwargs: Any) -> list[ChatMessage]:
        """The window (none when there is no conversation), with a ``user``'s facts."""
        window: Window | None = None
        with contextlib.suppress(NotFoundError):
            window = self._client.get_messages(self.conversation_id, policy=self._policy)
        prompt = None
        if self.user is not None:
            prompt = self._client.prompt(
                self.conversation_id, [], policy=self._policy, user=self.user
            ).messages
        return _window_messages(window, prompt)

    async def aget(self, input: str | None = None, **kwargs: Any) -> list[ChatMessage]:
        """The window, through ``async_client`` when given."""
        if self._async_client is None:
            return await super().aget(input, **kwargs)
        window: Window | None = None
        with contextlib.suppress(NotFoundError):
            window = await self._async_client.get_messages(
                self.conversation_id, policy=self._policy
            )
        prompt = None
        if self.user is not None:
            answer = await self._async_client.prompt(
                self.conversation_id, [], policy=self._policy, user=self.user
            )
            prompt = answer.messages
        return _window_messages(window, prompt)

    def get_all(self) -> list[ChatMessage]:
        """Everything stored, oldest first (the system message first)."""
        try:
            return [from_chatmem(m) for m in self._client.iter_history(self.conversation_id)]
        except NotFoundError:
            return []

    async def aget_all(self) -> list[ChatMessage]:
        """Everything stored, through ``async_client`` when given."""
        if self._async_client is None:
            return await super().aget_all()
        try:
            return [
                from_chatmem(m) async for m in self._async_client.iter_history(self.conversation_id)
            ]
        except NotFoundError:
            return []

    # writing

    def put(self, message: ChatMessage) -> None:
        """Appends ``message`` (one commit)."""
        self.put_messages([message])

    async def aput(self, message: ChatMessage) -> None:
        """Appends ``message`` (one commit)."""
        await self.aput_messages([message])

    def put_messages(self, messages: list[ChatMessage]) -> None:
        """Appends ``messages`` in one atomic commit (none, or only the facts message: nothing
        is sent)."""
        new = _convert(messages)
        if new:
            self._client.add_messages(
                self.conversation_id, new, policy=self._policy, user=self.user
            )

    async def aput_messages(self, messages: list[ChatMessage]) -> None:
        """Appends ``messages`` in one atomic commit, through ``async_client`` when given."""
        if self._async_client is None:
            return await super().aput_messages(messages)
        new = _convert(messages)
        if new:
            await self._async_client.add_messages(
                self.conversation_id, new, policy=self._policy, user=self.user
            )

    def set(self, messages: list[ChatMessage]) -> None:
        """Makes ``messages`` the conversation (see the class's description; the facts
        message left out)."""
        messages = _stored(messages)
        new = _convert(messages)  # a message chatmem cannot hold writes nothing
        stored = self.get_all()
        if stored and stored == messages[: len(stored)]:
            if new[len(stored) :]:
                self._client.add_messages(
                    self.conversation_id, new[len(stored) :], policy=self._policy, user=self.user
                )
            return
        if stored:
            self.reset()
        if new:
            self._client.add_messages(
                self.conversation_id, new, policy=self._policy, user=self.user
            )

    async def aset(self, messages: list[ChatMessage]) -> None:
        """:meth:`set`, through ``async_client`` when given."""
        if self._async_client is None:
            return await super().aset(messages)
        messages = _stored(messages)
        new = _convert(messages)
        stored = await self.aget_all()
        if stored and stored == messages[: len(stored)]:
            new = new[len(stored) :]
        elif stored:
            await self.areset()
        if new:
            await self._async_client.add_messages(
                self.conversation_id, new, policy=self._policy, user=self.user
            )

    def reset(self) -> None:
        """Deletes the conversation: window, history and summary."""
        with contextlib.suppress(NotFoundError):
            self._client.delete_conversation(self.conversation_id)

    async def areset(self) -> None:
        """:meth:`reset`, through ``async_client`` when given."""
        if self._async_client is None:
            return await super().areset()
        with contextlib.suppress(NotFoundError):
            await self._async_client.delete_conversation(self.conversation_id)


# ---------------------------------------------------------------------------------------------
# Chat store (ChatMemoryBuffer)


class ChatmemChatStore(BaseChatStore):
    """LlamaIndex's chat store over chatmem: a key is a conversation id.

    ``get_messages`` is the server's window (system message and summary first).
    ``add_message`` and a ``set_messages`` that extends what the window holds are one atomic
    commit each; a ``set_messages`` that rewrites earlier messages, ``delete_message`` and
    ``delete_last_message`` delete the conversation and write it anew (two requests, not
    atomic, and the history beyond the window is lost). ``client`` defaults to a
    :class:`~chatmem.Client` from ``CHATMEM_URL`` / ``CHATMEM_TOKEN``; with ``async_client``
    the ``a*`` methods use it rather than a thread; ``policy`` is sent with every request.
    It names no user, so no facts are read or sent: :class:`ChatmemMemory` with a ``user``
    does that.
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
        self._client.add_messages(key, _convert([message]), policy=self._policy)

    def set_messages(self, key: str, messages: list[ChatMessage]) -> None:
        """Makes ``messages`` the conversation: appends in one commit what follows the current
        window; otherwise deletes the conversation and writes ``messages`` anew."""
        new = _convert(messages)
        current = self.get_messages(key)
        if current and current == messages[: len(current)]:
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
            self._client.add_messages(key, _convert(messages), policy=self._policy)
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
        await self._async_client.add_messages(key, _convert([message]), policy=self._policy)
