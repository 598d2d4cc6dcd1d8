"""ChatmemMemory's own methods against a real ``chatmem serve``, blocking and async: the window
against the whole history (more than one page of it), one commit per put, set and reset."""

from __future__ import annotations

import pytest
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ThinkingBlock

import chatmem
from chatmem import AsyncClient, Client
from chatmem.llama_index import ChatmemMemory

from .conftest import Server


def _turns(n: int) -> list[ChatMessage]:
    out = []
    for i in range(n):
        out.append(ChatMessage(role=MessageRole.USER, content=f"问题 {i}"))
        out.append(
            ChatMessage(
                role=MessageRole.ASSISTANT,
                blocks=[ThinkingBlock(content=f"想 {i}", num_tokens=i)],
                additional_kwargs={"turn": i},
            )
        )
    return out


def test_window_history_put_set_reset(client: Client, conversation: str) -> None:
    memory = ChatmemMemory(conversation, client, policy={"max_messages": 4})
    assert memory.get() == []
    assert memory.get_all() == []
    turns = _turns(60)  # 120 messages: more than one page of history
    memory.put_messages(turns)
    assert len(list(client.iter_history(conversation))) == 120
    assert memory.get_all() == turns
    assert memory.get() == turns[-4:]  # the window, by the policy
    memory.put(ChatMessage(role=MessageRole.USER, content="再问"))
    assert memory.get_all()[-1].content == "再问"

    # set extending what is stored appends only what is new
    extended = [*memory.get_all(), ChatMessage(role=MessageRole.ASSISTANT, content="答")]
    memory.set(extended)
    assert memory.get_all() == extended
    # set with other messages replaces the conversation
    other = [ChatMessage(role=MessageRole.USER, content="新的开始")]
    memory.set(other)
    assert memory.get_all() == other
    memory.reset()
    assert memory.get_all() == []
    memory.reset()  # nothing to delete is not an error


def test_put_messages_is_one_commit(client: Client, conversation: str) -> None:
    memory = ChatmemMemory(conversation, client)
    memory.put(ChatMessage(role=MessageRole.USER, content="在吗"))
    with pytest.raises(chatmem.RequestTooLargeError):
        memory.put_messages(
            [
                ChatMessage(role=MessageRole.ASSISTANT, content="在"),
                ChatMessage(role=MessageRole.USER, content="x" * (256 * 1024 + 1)),
            ]
        )
    assert [m.content for m in memory.get_all()] == ["在吗"]  # neither was written
    memory.put_messages([])  # nothing to write sends nothing


def test_what_chatmem_cannot_hold_writes_nothing(client: Client, conversation: str) -> None:
    memory = ChatmemMemory(conversation, client)
    memory.put(ChatMessage(role=MessageRole.USER, content="在吗"))
    with pytest.raises(chatmem.ConversionError) as e:
        memory.set([ChatMessage(role=MessageRole.TOOL, content="无 id")])
    assert e.value.field == "messages[0].additional_kwargs.tool_call_id"
    assert [m.content for m in memory.get_all()] == ["在吗"]  # set did not delete first


@pytest.mark.anyio
async def test_async_methods(
    server: Server, aclient: AsyncClient, client: Client, conversation: str
) -> None:
    memory = ChatmemMemory(conversation, client, async_client=aclient, policy={"max_messages": 2})
    assert await memory.aget() == []
    assert await memory.aget_all() == []
    turns = _turns(60)
    await memory.aput_messages(turns)
    assert await memory.aget_all() == turns
    assert await memory.aget() == turns[-2:]
    await memory.aput(ChatMessage(role=MessageRole.USER, content="再问"))
    extended = [*turns, ChatMessage(role=MessageRole.USER, content="再问")]
    assert await memory.aget_all() == extended
    await memory.aset([*extended, ChatMessage(role=MessageRole.ASSISTANT, content="答")])
    assert len(list(client.iter_history(conversation))) == 122
    await memory.aset(turns[:1])
    assert await memory.aget_all() == turns[:1]
    await memory.areset()
    assert await memory.aget_all() == []


@pytest.mark.anyio
async def test_async_methods_without_an_async_client(client: Client, conversation: str) -> None:
    memory = ChatmemMemory(conversation, client)  # LlamaIndex runs the blocking ones in a thread
    await memory.aput_messages(_turns(2))
    assert await memory.aget_all() == _turns(2)
    assert await memory.aget() == _turns(2)
    await memory.aset(_turns(1))
    assert await memory.aget_all() == _turns(1)
    await memory.areset()
    assert await memory.aget() == []


def test_from_defaults(client: Client, conversation: str) -> None:
    memory = ChatmemMemory.from_defaults(
        conversation_id=conversation, client=client, chat_history=_turns(1)
    )
    assert ChatmemMemory(conversation, client).get_all() == _turns(1)
    assert memory.class_name() == "ChatmemMemory"
