"""Every message LangChain makes comes back from chatmem equal (``==``, LangChain compares
messages by their fields): through :func:`to_chatmem` and :func:`from_chatmem` alone, and
written by ``ChatmemChatMessageHistory`` to a real server (SQLite, PostgreSQL) and read back,
from the stored log and from the window."""

from __future__ import annotations

import json
import uuid
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from chatmem import Policy, ToolCall
from chatmem.langchain import ChatmemChatMessageHistory, from_chatmem, to_chatmem

from .conftest import Server
from .langchain_messages import (
    ais,
    contents,
    humans,
    ids,
    messages,
    names,
    non_system,
    systems,
)

SERVER_EXAMPLES = settings(
    max_examples=40,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
WHOLE_WINDOW: Policy = {"max_messages": 1000}

TEXT_ONLY = {"system", "developer", "tool"}


@settings(
    max_examples=600, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(messages)
def test_a_message_comes_back_equal_and_writes_again_the_same(message: BaseMessage) -> None:
    stored = to_chatmem(message)
    sent = json.loads(json.dumps(stored))  # what the server holds: JSON
    back = from_chatmem(sent)
    assert back == message
    assert type(back) is type(message)
    assert to_chatmem(back) == stored  # read back (invalid tool calls too), it writes again


@settings(max_examples=300, deadline=None, database=None)
@given(messages)
def test_the_body_is_what_the_model_may_see(message: BaseMessage) -> None:
    body: dict[str, Any] = dict(to_chatmem(message))
    parts = body.get("content")
    if isinstance(parts, list):
        kinds = {p["type"] for p in parts}
        if body["role"] in TEXT_ONLY:
            assert kinds <= {"text"}
        elif body["role"] == "assistant":
            assert kinds <= {"text", "refusal"}
        else:
            assert kinds <= {"text", "image_url", "input_audio", "file"}
    for call in body.get("tool_calls", []):
        assert call["id"]
        assert call["function"]["name"]
        assert isinstance(json.loads(call["function"]["arguments"]), dict)
    # Reasoning is kept beside the content, never in it.
    assert "reasoning" not in json.dumps(parts)
    assert set(body) <= {
        "role",
        "content",
        "name",
        "tool_calls",
        "tool_call_id",
        "reasoning_content",
        "is_error",
        "metadata",
    }


@settings(database=None)
@given(contents, ids, names)
def test_the_body_wins_where_it_was_edited(content: Any, id_: str | None, name: str | None) -> None:
    stored: dict[str, Any] = dict(to_chatmem(HumanMessage(content, id=id_, name=name)))
    stored["content"] = "改过的"
    back = from_chatmem(stored)  # type: ignore[arg-type]
    assert back == HumanMessage("改过的", id=id_, name=name)


def test_the_summary_the_server_renders_into_the_system_message_is_read() -> None:
    stored: dict[str, Any] = dict(to_chatmem(SystemMessage("你是售后。", id="s1")))
    stored["content"] = "你是售后。\n\nSummary: 订单 LC202610060018。"
    assert from_chatmem(stored) == SystemMessage(stored["content"], id="s1")  # type: ignore[arg-type]


def test_messages_other_clients_wrote_convert_from_the_body() -> None:
    assert from_chatmem({"role": "developer", "content": "d"}) == SystemMessage(
        "d", additional_kwargs={"__openai_role__": "developer"}
    )
    bad_args: ToolCall = {
        "id": "c",
        "type": "function",
        "function": {"name": "f", "arguments": "{x"},
    }
    ai = from_chatmem({"role": "assistant", "tool_calls": [bad_args], "reasoning_content": "r"})
    assert isinstance(ai, AIMessage)
    assert (ai.tool_calls, ai.additional_kwargs) == ([], {"reasoning_content": "r"})
    assert [c["args"] for c in ai.invalid_tool_calls] == ["{x"]
    assert from_chatmem(to_chatmem(ai)) == ai  # read back with an invalid call, it writes again
    tool = from_chatmem({"role": "tool", "tool_call_id": "c", "content": "x", "is_error": True})
    assert tool == ToolMessage("x", tool_call_id="c", status="error")


@SERVER_EXAMPLES
@given(
    system=st.none() | systems,
    rest=st.lists(non_system, min_size=1, max_size=5),
)
def test_written_through_the_history_the_stored_log_reads_back_equal(
    server: Server, system: BaseMessage | None, rest: list[BaseMessage]
) -> None:
    """chatmem keeps one system message, first: the lists hold at most one, there."""
    written = ([system] if system else []) + rest
    conversation = f"py-rt/{uuid.uuid4().hex}"
    with server.client() as client:
        ChatmemChatMessageHistory(conversation, client=client).add_messages(written)
        assert [from_chatmem(m) for m in client.iter_history(conversation)] == written
        client.delete_conversation(conversation)


def _as_ai(message: BaseMessage, tool_calls: list[Any]) -> AIMessage:
    """``message``'s fields as an AI message (not a chunk) with ``tool_calls``."""
    fields = message.model_dump()
    for key in ("type", "tool_call_chunks", "chunk_position"):
        fields.pop(key, None)
    return AIMessage(**{**fields, "tool_calls": tool_calls})


@st.composite
def conversations(draw: st.DrawFn) -> list[BaseMessage]:
    """What a window keeps whole: turns that open on a user message, each tool call with an
    id answered by the tool results right after it."""
    out: list[BaseMessage] = []
    if draw(st.booleans()):
        out.append(draw(systems))
    for _ in range(draw(st.integers(1, 3))):
        out.append(draw(humans))
        for _ in range(draw(st.integers(0, 2))):
            call = draw(ais)
            assert isinstance(call, AIMessage)
            answered = [
                {**c, "id": f"call_{uuid.uuid4().hex[:8]}", "name": c["name"] or "f"}
                for c in call.tool_calls
            ] or [{"name": "f", "args": {}, "id": f"call_{uuid.uuid4().hex[:8]}"}]
            out.append(_as_ai(call, answered))
            for c in answered:
                result = ToolMessage(draw(contents), tool_call_id=c["id"], id=draw(ids))
                out.append(result)
        out.append(_as_ai(draw(ais), []))
    return out


@SERVER_EXAMPLES
@given(conversations())
def test_the_window_reads_back_as_written(server: Server, written: list[BaseMessage]) -> None:
    conversation = f"py-rt/{uuid.uuid4().hex}"
    with server.client() as client:
        history = ChatmemChatMessageHistory(conversation, client=client, policy=WHOLE_WINDOW)
        history.add_messages(written)
        assert history.messages == written
        history.clear()
