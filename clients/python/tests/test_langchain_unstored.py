"""A turn chatmem refuses through ``RunnableWithMessageHistory`` is not lost silently:
LangChain stores the turn from a tracer listener and only logs its error, so the history
remembers the failed write and the next read raises :class:`UnstoredWriteError`."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory

import chatmem
from chatmem import AsyncClient, Client
from chatmem.langchain import ChatmemChatMessageHistory, UnstoredWriteError

from .conftest import Server
from .test_langchain import RecordingChatModel

BIG = "我" * (700 * 1024)  # 2.1 MB of UTF-8: over the server's limit for a request's body
LONG = "x" * (256 * 1024 + 1)  # a body the server reads whole: over its limit for one text
PROMPT = ChatPromptTemplate.from_messages([MessagesPlaceholder("history"), ("human", "{question}")])


def _chain(
    model: RecordingChatModel,
    history: Any,
) -> RunnableWithMessageHistory:
    return RunnableWithMessageHistory(
        PROMPT | model,
        history,
        input_messages_key="question",
        history_messages_key="history",
    )


def test_a_refused_turn_is_raised_by_the_next_turn(
    client: Client, conversation: str, caplog: pytest.LogCaptureFixture
) -> None:
    model = RecordingChatModel(
        messages=iter([AIMessage("你好。"), AIMessage("收到。"), AIMessage("好的。")])
    )
    errors: list[tuple[Exception, list[BaseMessage]]] = []
    chain = _chain(
        model,
        lambda sid: ChatmemChatMessageHistory(
            sid, client=client, on_error=lambda e, m: errors.append((e, m))
        ),
    )
    config: Any = {"configurable": {"session_id": conversation}}
    chain.invoke({"question": "你好"}, config=config)
    with caplog.at_level(logging.WARNING):
        answer = chain.invoke({"question": BIG}, config=config)
    # What LangChain does with the refusal: it logs it and answers as if the turn were stored.
    assert answer.content == "收到。"
    assert "RequestTooLargeError" in caplog.text
    [(error, lost)] = errors
    assert isinstance(error, chatmem.RequestTooLargeError)
    assert [(m.type, m.content) for m in lost] == [("human", BIG), ("ai", "收到。")]

    # The next turn raises, naming the conversation, and the model is not called.
    with pytest.raises(UnstoredWriteError) as e:
        chain.invoke({"question": "那单能退吗？"}, config=config)
    assert e.value.__cause__ is error
    assert e.value.messages == lost
    assert e.value.conversation_id == conversation
    assert "2 messages" in str(e.value)
    assert BIG not in str(e.value)
    assert len(model.received) == 2

    # Reported once: the conversation goes on, without the refused turn.
    chain.invoke({"question": "那单能退吗？"}, config=config)
    assert [m.content for m in model.received[-1]] == ["你好", "你好。", "那单能退吗？"]


def test_a_later_write_that_succeeds_clears_the_failure(client: Client, conversation: str) -> None:
    history = ChatmemChatMessageHistory(conversation, client=client)
    with pytest.raises(chatmem.RequestTooLargeError):
        history.add_messages([HumanMessage(BIG)])
    ChatmemChatMessageHistory(conversation, client=client).add_messages([HumanMessage("重发")])
    assert history.messages == [HumanMessage("重发")]


def test_a_server_that_is_down_is_reported_too(server: Server, conversation: str) -> None:
    """The write fails in transit: the next read of another history of that server says so."""
    with Client("http://127.0.0.1:9", token=server.token_a, timeout=2.0) as down:
        with pytest.raises(chatmem.TransportError):
            ChatmemChatMessageHistory(conversation, client=down).add_messages([HumanMessage("x")])
        with pytest.raises(UnstoredWriteError) as e:
            _ = ChatmemChatMessageHistory(conversation, client=down).messages
        assert isinstance(e.value.error, chatmem.TransportError)
    with server.client() as up:  # another server (or tenant) has its own conversations
        assert ChatmemChatMessageHistory(conversation, client=up).messages == []


@pytest.mark.anyio
async def test_the_async_chain_reports_a_refused_turn(server: Server, conversation: str) -> None:
    model = RecordingChatModel(messages=iter([AIMessage("收到。"), AIMessage("x")]))
    async with AsyncClient(server.url, token=server.token_a) as aclient:
        with server.client() as client:
            chain = _chain(
                model,
                lambda sid: ChatmemChatMessageHistory(sid, client=client, async_client=aclient),
            )
            config: Any = {"configurable": {"session_id": conversation}}
            answer = await chain.ainvoke({"question": LONG}, config=config)
            assert answer.content == "收到。"
            with pytest.raises(UnstoredWriteError) as e:
                await chain.ainvoke({"question": "还在吗？"}, config=config)
            assert isinstance(e.value.error, chatmem.RequestTooLargeError)
