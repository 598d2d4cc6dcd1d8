"""A user's facts through ``ChatmemMemory(user=)``, against a real ``chatmem serve --facts`` and
a scripted loopback model: a ``FunctionAgent`` and a chat engine are sent the user's facts
(added by hand) right after the system message; without a user nothing changes; the facts
message is never stored, however often what was read is written back (``set``); every write
names the user."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock
from llama_index.core.chat_engine import SimpleChatEngine

import chatmem
from chatmem import AsyncClient, Client, Message
from chatmem.llama_index import ChatmemMemory, FactsMessage

from .conftest import FACTS, Server
from .conftest import FACTS_HEADING as HEADING
from .llama_index_support import Model, llm, scripted_model
from .upstream_agent import text_of

SYSTEM = "你是售后客服。"

pytestmark = [
    pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince20"),
    pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince211"),
]


@pytest.fixture(scope="module")
def model() -> Iterator[Model]:
    with scripted_model() as m:
        yield m


def _stored(client: Client, conversation: str) -> list[Message]:
    return list(client.iter_history(conversation))


def _no_facts_text(messages: list[Message]) -> bool:
    return not any(HEADING in text_of(dict(m)) for m in messages)


def _sent(model: Model, since: int) -> list[list[dict[str, Any]]]:
    return [r["messages"] for r in model.received[since:]]


@pytest.mark.anyio
@pytest.mark.parametrize("use_async", [True, False])
async def test_an_agent_is_sent_the_users_facts_and_stores_none(
    server: Server,
    aclient: AsyncClient,
    model: Model,
    conversation: str,
    user: str,
    use_async: bool,
) -> None:
    since = len(model.received)
    for question in ("你好", "还在吗"):  # a new agent and memory each turn
        memory = ChatmemMemory(
            conversation, server.client(), async_client=aclient if use_async else None, user=user
        )
        agent = FunctionAgent(tools=[], llm=llm(model), system_prompt=SYSTEM, streaming=False)
        await agent.run(user_msg=question, memory=memory)
    first, second = _sent(model, since)
    assert first[0]["role"] == "system"
    assert first[1:] == [
        {"role": "user", "content": FACTS},
        {"role": "user", "content": "你好"},
    ]
    assert second[1:] == [
        {"role": "user", "content": FACTS},
        {"role": "user", "content": "你好"},
        {"role": "assistant", "content": "收到：你好"},
        {"role": "user", "content": "还在吗"},
    ]
    with server.client() as client:
        stored = _stored(client, conversation)
    assert [(m["role"], m["content"]) for m in stored] == [
        ("user", "你好"),
        ("assistant", "收到：你好"),
        ("user", "还在吗"),
        ("assistant", "收到：还在吗"),
    ]


def test_a_chat_engine_is_sent_the_users_facts(
    server: Server, model: Model, conversation: str, user: str
) -> None:
    since = len(model.received)
    with server.client() as client:
        memory = ChatmemMemory(conversation, client, user=user)
        memory.put(ChatMessage(role=MessageRole.SYSTEM, content=SYSTEM))
        engine = SimpleChatEngine.from_defaults(llm=llm(model), memory=memory)
        assert str(engine.chat("你好")) == "收到：你好"
        (sent,) = _sent(model, since)
        assert sent == [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": FACTS},
            {"role": "user", "content": "你好"},
        ]
        stored = _stored(client, conversation)
        assert [m["role"] for m in stored] == ["system", "user", "assistant"]
        assert _no_facts_text(stored)


def test_without_a_user_nothing_changes(
    server: Server, model: Model, conversation: str, user: str
) -> None:
    since = len(model.received)
    with server.client() as client:
        memory = ChatmemMemory(conversation, client)
        memory.put(ChatMessage(role=MessageRole.SYSTEM, content=SYSTEM))
        SimpleChatEngine.from_defaults(llm=llm(model), memory=memory).chat("你好")
        assert _sent(model, since) == [
            [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "你好"}]
        ]
        assert not any(isinstance(m, FactsMessage) for m in memory.get())


def test_set_to_what_get_read_writes_nothing_and_keeps_the_facts_out(
    client: Client, conversation: str, user: str
) -> None:
    memory = ChatmemMemory(conversation, client, user=user)
    assert memory.get() == [FactsMessage(role=MessageRole.USER, blocks=[TextBlock(text=FACTS)])]
    memory.put_messages(memory.get())  # the facts alone: nothing written
    with pytest.raises(chatmem.NotFoundError):
        client.get_messages(conversation)
    memory.set(
        [
            ChatMessage(role=MessageRole.SYSTEM, content=SYSTEM),
            ChatMessage(role=MessageRole.USER, content="你好"),
        ]
    )
    before = _stored(client, conversation)
    for _ in range(3):
        read = memory.get()
        assert [isinstance(m, FactsMessage) for m in read] == [False, True, False]
        memory.set(read)  # what it read: nothing to change
        assert _stored(client, conversation) == before
    read = memory.get()
    memory.set([*read, ChatMessage(role=MessageRole.ASSISTANT, content="您好")])
    after = _stored(client, conversation)  # appended, nothing rewritten
    assert after[: len(before)] == before
    assert [(m["role"], m["content"]) for m in after[len(before) :]] == [("assistant", "您好")]
    assert _no_facts_text(_stored(client, conversation))
    assert memory.get_all() == [m for m in memory.get() if not isinstance(m, FactsMessage)]


@pytest.mark.anyio
async def test_the_async_memory_reads_facts_and_writes_without_them(
    server: Server, aclient: AsyncClient, conversation: str, user: str
) -> None:
    memory = ChatmemMemory(conversation, server.client(), async_client=aclient, user=user)
    await memory.aput_messages([ChatMessage(role=MessageRole.USER, content="你好")])
    read = await memory.aget()
    assert read[0] == FactsMessage(role=MessageRole.USER, blocks=[TextBlock(text=FACTS)])
    assert [m.content for m in read[1:]] == ["你好"]
    await memory.aset(read)
    await memory.aput(read[0])
    with server.client() as client:
        stored = _stored(client, conversation)
    assert [(m["role"], m["content"]) for m in stored] == [("user", "你好")]


@pytest.mark.anyio
async def test_every_write_names_the_user(
    server: Server, aclient: AsyncClient, conversation: str
) -> None:
    # the server refuses an empty user id, naming it: a write that sent none would pass
    message = ChatMessage(role=MessageRole.USER, content="你好")
    with server.client() as client:
        memory = ChatmemMemory(conversation, client, user="")
        with pytest.raises(chatmem.BadRequestError, match="user"):
            memory.put(message)
        with pytest.raises(chatmem.BadRequestError, match="user"):
            memory.set([message])
        with pytest.raises(chatmem.BadRequestError, match="user"):
            memory.get()
        amemory = ChatmemMemory(conversation, client, async_client=aclient, user="")
        with pytest.raises(chatmem.BadRequestError, match="user"):
            await amemory.aput(message)
        with pytest.raises(chatmem.BadRequestError, match="user"):
            await amemory.aset([message])
        with pytest.raises(chatmem.NotFoundError):
            client.get_messages(conversation)
