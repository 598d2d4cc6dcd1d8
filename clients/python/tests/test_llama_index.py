"""ChatmemChatStore with the real llama-index-core: ``ChatMemoryBuffer`` over chatmem, the
after-sale scenario through a chat engine whose MockLLM answers with the prompt it was given,
the store's methods, conversion (the body, and the copy in metadata), and refusals that write
nothing."""

from __future__ import annotations

import json
from datetime import date

import pytest
from llama_index.core.base.llms.types import (
    ChatMessage,
    ImageBlock,
    MessageRole,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
)
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms import MockLLM
from llama_index.core.memory import ChatMemoryBuffer
from pydantic import BaseModel

import chatmem
from chatmem import AsyncClient, Client
from chatmem.llama_index import ChatmemChatStore

from .conftest import Server

ORDER = "LC202610060018"


def _memory(client: Client, conversation: str) -> ChatMemoryBuffer:
    return ChatMemoryBuffer.from_defaults(
        chat_store=ChatmemChatStore(client), chat_store_key=conversation, token_limit=3000
    )


def test_the_later_turn_still_sees_the_order_number(client: Client, conversation: str) -> None:
    # MockLLM answers with the prompt it received, so each answer shows what the model saw.
    turns = [f"我的订单是 {ORDER}，还没发货。", "营业时间是几点？", "那单能退吗？"]
    answers = []
    for text in turns:  # a new engine and memory each turn, as separate requests would have
        engine = SimpleChatEngine.from_defaults(llm=MockLLM(), memory=_memory(client, conversation))
        answers.append(str(engine.chat(text)))
    assert ORDER in answers[2]
    assert "营业时间是几点？" in answers[2]
    stored = list(client.iter_history(conversation))
    assert [m["role"] for m in stored] == ["user", "assistant"] * 3
    assert stored[4] == {"role": "user", "content": "那单能退吗？"}


def test_store_methods(client: Client, conversation: str) -> None:
    store = ChatmemChatStore(client)
    assert store.get_messages(conversation) == []
    first = [
        ChatMessage(role=MessageRole.SYSTEM, content="售后"),
        ChatMessage(role=MessageRole.USER, content="hi"),
    ]
    store.set_messages(conversation, first)
    store.add_message(conversation, ChatMessage(role=MessageRole.ASSISTANT, content="hello"))
    assert [m.content for m in store.get_messages(conversation)] == ["售后", "hi", "hello"]
    # set_messages extending the window appends only what is new: the history keeps one copy
    extended = [
        *store.get_messages(conversation),
        ChatMessage(role=MessageRole.USER, content="再见"),
    ]
    store.set_messages(conversation, extended)
    assert [m["content"] for m in client.iter_history(conversation)] == [
        "售后",
        "hi",
        "hello",
        "再见",
    ]
    removed = store.delete_last_message(conversation)
    assert removed is not None
    assert removed.content == "再见"
    removed = store.delete_message(conversation, 1)
    assert removed is not None
    assert removed.content == "hi"
    # rewritten: the system message and the answer, which now opens the conversation (as a
    # greeting does) and so stays in the window
    assert [m["content"] for m in client.iter_history(conversation)] == ["售后", "hello"]
    assert [m.content for m in store.get_messages(conversation)] == ["售后", "hello"]
    assert conversation in store.get_keys()
    deleted = store.delete_messages(conversation)
    assert deleted is not None
    assert store.get_messages(conversation) == []
    assert conversation not in store.get_keys()
    assert store.delete_messages(conversation) is None


def test_conversion_round_trips(client: Client, conversation: str) -> None:
    store = ChatmemChatStore(client)
    messages = [
        ChatMessage(
            role=MessageRole.USER,
            blocks=[
                TextBlock(text="这个包裹坏了"),
                ImageBlock(url="https://example.com/a.png", detail="low"),
            ],
        ),
        ChatMessage(
            role=MessageRole.ASSISTANT,
            blocks=[
                ThinkingBlock(content="先查订单"),
                ToolCallBlock(
                    tool_call_id="call_1", tool_name="order_status", tool_kwargs={"order": ORDER}
                ),
            ],
        ),
        ChatMessage(
            role=MessageRole.TOOL,
            content='{"status":"not_shipped"}',
            additional_kwargs={"tool_call_id": "call_1"},
        ),
        ChatMessage(role=MessageRole.ASSISTANT, content=f"订单 {ORDER} 尚未发货。"),
    ]
    store.set_messages(conversation, messages)
    assert list(client.iter_history(conversation)) == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "这个包裹坏了"},
                {
                    "type": "image_url",
                    "image_url": {"url": "https://example.com/a.png", "detail": "low"},
                },
            ],
        },
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "order_status", "arguments": f'{{"order": "{ORDER}"}}'},
                }
            ],
            "reasoning_content": "先查订单",
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"status":"not_shipped"}'},
        {"role": "assistant", "content": f"订单 {ORDER} 尚未发货。"},
    ]
    back = store.get_messages(conversation)
    assert back == messages  # each body gives its message back: no copy in metadata
    # setting what is already there writes nothing
    store.set_messages(conversation, back)
    assert len(list(client.iter_history(conversation))) == 4


def test_what_the_body_cannot_say_rides_in_metadata(client: Client, conversation: str) -> None:
    store = ChatmemChatStore(client)
    message = ChatMessage(
        role=MessageRole.ASSISTANT,
        blocks=[ThinkingBlock(content="先查订单", num_tokens=4), TextBlock(text="已查")],
        additional_kwargs={"tool_call_id": "call_1", "trace": {"ids": (1, 2), "raw": b"\x00"}},
    )
    store.add_message(conversation, message)
    (stored,) = client.iter_history(conversation)
    assert {k: v for k, v in stored.items() if k != "metadata"} == {
        "role": "assistant",
        "content": "已查",
        "reasoning_content": "先查订单",
    }
    copy = stored["metadata"]["llama_index"]
    # what the body holds is not copied: the texts are marks, not text
    assert "先查订单" not in json.dumps(copy, ensure_ascii=False)
    assert "已查" not in json.dumps(copy, ensure_ascii=False)
    assert store.get_messages(conversation) == [message]


class _Opaque(BaseModel):
    x: int = 1


@pytest.mark.parametrize(
    ("message", "field"),
    [
        (
            ChatMessage(role=MessageRole.FUNCTION, content="x"),
            "messages[0].additional_kwargs.tool_call_id",
        ),
        (
            ChatMessage(
                role=MessageRole.USER, content="x", additional_kwargs={"when": date(2026, 10, 6)}
            ),
            "messages[0].additional_kwargs.when",
        ),
        (
            ChatMessage(role=MessageRole.USER, content="x", additional_kwargs={"m": {1: "x"}}),
            "messages[0].additional_kwargs.m.1",
        ),
        (
            ChatMessage(role=MessageRole.USER, content="x", additional_kwargs={"p": _Opaque()}),
            "messages[0].additional_kwargs.p",
        ),
        (
            ChatMessage(role=MessageRole.TOOL, content="x"),
            "messages[0].additional_kwargs.tool_call_id",
        ),
    ],
)
def test_what_chatmem_cannot_hold_is_refused_and_nothing_written(
    client: Client, conversation: str, message: ChatMessage, field: str
) -> None:
    store = ChatmemChatStore(client)
    with pytest.raises(chatmem.ConversionError) as e:
        store.add_message(conversation, message)
    assert isinstance(e.value, ValueError)
    assert e.value.field == field
    assert store.get_messages(conversation) == []


def test_server_errors_reach_the_caller(client: Client, conversation: str) -> None:
    store = ChatmemChatStore(client)
    with pytest.raises(chatmem.BadRequestError) as e:
        store.add_message("bad\nid", ChatMessage(role=MessageRole.USER, content="hi"))
    assert (e.value.status, e.value.code) == (400, "invalid_request")
    big = ChatMessage(role=MessageRole.USER, content="x" * (256 * 1024 + 1))
    with pytest.raises(chatmem.RequestTooLargeError) as e2:
        store.add_message(conversation, big)
    assert e2.value.request_id
    assert store.get_messages(conversation) == []


@pytest.mark.anyio
async def test_async_store(server: Server, conversation: str) -> None:
    async with AsyncClient(server.url, token=server.token_a) as aclient:
        with server.client() as client:
            store = ChatmemChatStore(client, async_client=aclient)
            memory = ChatMemoryBuffer.from_defaults(
                chat_store=store, chat_store_key=conversation, token_limit=3000
            )
            await memory.aput(ChatMessage(role=MessageRole.USER, content=f"订单 {ORDER}"))
            await memory.aput(ChatMessage(role=MessageRole.ASSISTANT, content="收到"))
            got = await memory.aget_all()
            assert [m.content for m in got] == [f"订单 {ORDER}", "收到"]
            assert len(await store.aget_messages(conversation)) == 2
