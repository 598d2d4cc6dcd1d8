"""ChatmemChatMessageHistory with the real langchain-core: the after-sale scenario through
``RunnableWithMessageHistory`` and a fake chat model that records what it was sent, message
conversion both ways, and refusals that write nothing."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    FunctionMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatResult
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory
from pydantic import Field

import chatmem
from chatmem import AsyncClient, Client, Policy
from chatmem.langchain import (
    ChatmemChatMessageHistory,
    UnstoredWriteError,
    from_chatmem,
    to_chatmem,
)

from .conftest import Server

ORDER = "LC202610060018"
SEED = json.loads((Path(__file__).parents[3] / "examples" / "aftersale.json").read_text())


class RecordingChatModel(GenericFakeChatModel):
    """langchain-core's fake chat model, keeping the messages of every call it gets."""

    received: list[list[BaseMessage]] = Field(default_factory=list)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.received.append(list(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def _replies() -> Iterator[AIMessage]:
    return iter([AIMessage("物流今天会更新。"), AIMessage("可以退。")])


def _after_sale(client: Client, conversation: str, policy: Policy | None) -> list[BaseMessage]:
    """The seed's first turns (the order number, a tool round trip), then two turns through
    ``RunnableWithMessageHistory``; the messages the model received on the last turn."""
    history = ChatmemChatMessageHistory(conversation, client=client, policy=policy)
    history.add_messages([from_chatmem(m) for m in SEED[:7]])
    model = RecordingChatModel(messages=_replies())
    prompt = ChatPromptTemplate.from_messages(
        [MessagesPlaceholder("history"), ("human", "{question}")]
    )
    chain = RunnableWithMessageHistory(
        prompt | model,
        lambda session_id: ChatmemChatMessageHistory(session_id, client=client, policy=policy),
        input_messages_key="question",
        history_messages_key="history",
    )
    config: Any = {"configurable": {"session_id": conversation}}
    chain.invoke({"question": "物流一直没有更新。"}, config=config)
    answer = chain.invoke({"question": "那单能退吗？"}, config=config)
    assert answer.content == "可以退。"
    assert len(model.received) == 2
    return model.received[-1]


def test_the_later_turn_still_sees_the_order_number(client: Client, conversation: str) -> None:
    sent = _after_sale(client, conversation, None)
    assert isinstance(sent[0], SystemMessage)
    assert sent[0].content == SEED[0]["content"]
    assert any(ORDER in str(m.content) for m in sent[1:])
    assert sent[-1] == HumanMessage("那单能退吗？")
    # the tool round trip came back as LangChain's tool call and tool result
    call = next(m for m in sent if isinstance(m, AIMessage) and m.tool_calls)
    assert call.tool_calls[0]["args"] == {"order": ORDER}
    result = next(m for m in sent if isinstance(m, ToolMessage))
    assert result.tool_call_id == call.tool_calls[0]["id"]
    # every turn was stored once: the seed, then two turns of two messages
    stored = list(client.iter_history(conversation))
    assert len(stored) == 7 + 4
    assert [{k: v for k, v in m.items() if k != "metadata"} for m in stored[-2:]] == [
        {"role": "user", "content": "那单能退吗？"},
        {"role": "assistant", "content": "可以退。"},
    ]


def test_the_model_sees_the_servers_window(client: Client, conversation: str) -> None:
    """The control: in a 4-message window the order has left, and the model does not see it."""
    sent = _after_sale(client, conversation, {"max_messages": 4})
    assert isinstance(sent[0], SystemMessage)
    assert not any(ORDER in str(m.content) for m in sent)
    assert len(sent) == 4


def test_conversion_round_trips(client: Client, conversation: str) -> None:
    messages: list[BaseMessage] = [
        SystemMessage("售后", additional_kwargs={"__openai_role__": "developer"}),
        HumanMessage(
            [
                {"type": "text", "text": "这个包裹坏了"},
                {"type": "image", "base64": "iVBORw0KGgo=", "mime_type": "image/png"},
                {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
                {"type": "audio", "base64": "UklGRg==", "mime_type": "audio/wav"},
            ],
            name="customer",
            id="m1",
        ),
        AIMessage(
            [{"type": "reasoning", "reasoning": "先查订单"}],
            tool_calls=[
                {"name": "order_status", "args": {"order": ORDER}, "id": "call_1"},
                {"name": "order_status", "args": {"order": "?"}, "id": None},
            ],
            invalid_tool_calls=[
                {"name": "refund", "args": "{order", "id": "call_2", "error": None}
            ],
            usage_metadata={"input_tokens": 12, "output_tokens": 3, "total_tokens": 15},
            response_metadata={"model_name": "gpt-4o-mini", "finish_reason": "tool_calls"},
        ),
        ToolMessage("timeout", tool_call_id="call_1", status="error", artifact={"ms": 5000}),
        AIMessage([{"type": "text", "text": "查询"}, {"type": "image_url", "image_url": "x"}]),
    ]
    history = ChatmemChatMessageHistory(conversation, client=client)
    history.add_messages(messages)
    stored = list(client.iter_history(conversation))
    # The bodies: what a model is sent (the valid call with an id; reasoning beside the
    # content; the assistant's image and the call without an id only in the copy).
    assert [{k: v for k, v in m.items() if k != "metadata"} for m in stored] == [
        {"role": "developer", "content": "售后"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "这个包裹坏了"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
                {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
                {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
            ],
            "name": "customer",
        },
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "order_status", "arguments": json.dumps({"order": ORDER})},
                }
            ],
            "reasoning_content": "先查订单",
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "timeout", "is_error": True},
        {"role": "assistant", "content": [{"type": "text", "text": "查询"}]},
    ]
    assert all(
        m["metadata"]["langchain"]["type"] in ("system", "human", "ai", "tool") for m in stored
    )
    assert [from_chatmem(m) for m in stored] == messages
    assert [to_chatmem(m, i) for i, m in enumerate(messages)] == stored
    assert history.messages == messages
    history.clear()
    assert history.messages == []


@pytest.mark.parametrize(
    ("message", "field"),
    [
        (FunctionMessage(content="{}", name="f"), "messages[1].type"),
        (RemoveMessage(id="m1"), "messages[1].type"),
        (ToolMessage("x", tool_call_id=""), "messages[1].tool_call_id"),
        (ToolMessage("x", tool_call_id="c", artifact=object()), "messages[1].artifact"),
        (
            AIMessage("x", additional_kwargs={"parsed": ("a", 1)}),
            "messages[1].additional_kwargs.parsed",
        ),
        (
            AIMessage("x", response_metadata={"logprob": math.nan}),
            "messages[1].response_metadata.logprob",
        ),
        (HumanMessage("x", additional_kwargs={"n": 2**64}), "messages[1].additional_kwargs.n"),
        (HumanMessage("\ud800"), "messages[1].content"),
    ],
)
def test_what_chatmem_cannot_hold_is_refused_and_nothing_written(
    client: Client, conversation: str, message: BaseMessage, field: str
) -> None:
    history = ChatmemChatMessageHistory(conversation, client=client)
    with pytest.raises(chatmem.ConversionError) as e:
        history.add_messages([HumanMessage("hi"), message])
    assert isinstance(e.value, ValueError)
    assert e.value.field == field
    assert str(e.value).startswith(field)
    with pytest.raises(UnstoredWriteError):  # the refusal is reported to the next read too
        _ = history.messages
    assert history.messages == []


def test_an_oversized_message_raises_the_servers_error(client: Client, conversation: str) -> None:
    history = ChatmemChatMessageHistory(conversation, client=client)
    history.add_messages([HumanMessage("hi"), AIMessage("hello")])
    with pytest.raises(chatmem.RequestTooLargeError) as e:
        history.add_messages([HumanMessage("ok"), AIMessage("x" * (256 * 1024 + 1))])
    assert (e.value.status, e.value.code) == (413, "too_large")
    assert e.value.request_id
    with pytest.raises(UnstoredWriteError) as unstored:
        _ = history.messages
    assert unstored.value.error is e.value
    assert history.messages == [HumanMessage("hi"), AIMessage("hello")]


def test_a_bad_id_raises_the_servers_error(client: Client) -> None:
    history = ChatmemChatMessageHistory("bad\nid", client=client)
    with pytest.raises(chatmem.BadRequestError) as e:
        history.add_messages([HumanMessage("hi")])
    assert (e.value.status, e.value.code) == (400, "invalid_request")
    with pytest.raises(UnstoredWriteError):
        _ = history.messages
    with pytest.raises(chatmem.BadRequestError):
        _ = history.messages


@pytest.mark.anyio
async def test_async_history_in_the_chain(server: Server, conversation: str) -> None:
    async with AsyncClient(server.url, token=server.token_a) as aclient:
        with server.client() as client:
            model = RecordingChatModel(messages=_replies())
            prompt = ChatPromptTemplate.from_messages(
                [("system", "你是邻里仓售后。"), MessagesPlaceholder("history"), ("human", "{q}")]
            )
            chain = RunnableWithMessageHistory(
                prompt | model,
                lambda sid: ChatmemChatMessageHistory(sid, client=client, async_client=aclient),
                input_messages_key="q",
                history_messages_key="history",
            )
            config: Any = {"configurable": {"session_id": conversation}}
            await chain.ainvoke({"q": f"我的订单是 {ORDER}，还没发货。"}, config=config)
            await chain.ainvoke({"q": "那单能退吗？"}, config=config)
            assert ORDER in str(model.received[-1][1].content)
            stored = [m async for m in aclient.iter_history(conversation)]
            assert [m["role"] for m in stored] == ["user", "assistant", "user", "assistant"]
            history = ChatmemChatMessageHistory(conversation, client=client, async_client=aclient)
            assert len(await history.aget_messages()) == 4
            await history.aclear()
            assert await history.aget_messages() == []
