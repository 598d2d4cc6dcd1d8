"""The clients against a real ``chatmem serve``: every route, errors, tenants, two writers."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import chatmem
from chatmem import AsyncClient, Client, Message

from .conftest import Proxy, Server

HERE = Path(__file__).parent
TURN: list[Message] = [
    {"role": "user", "content": "我的订单是 LC202610060018，还没发货。"},
    {"role": "assistant", "content": "订单 LC202610060018 尚未发货。"},
]


def test_routes_round_trip(client: Client, conversation: str) -> None:
    assert client.health() == {"status": "ok"}
    window = client.add_messages(conversation, [{"role": "system", "content": "售后"}, *TURN])
    assert window.conversation == conversation
    assert [m["role"] for m in window.messages] == ["system", "user", "assistant"]
    assert client.get_messages(conversation).messages == window.messages
    # A request's own window policy: the window may not start on the assistant's answer.
    small = client.get_messages(conversation, policy={"max_messages": 2})
    assert small.messages == window.messages[:1]
    assert conversation in list(client.iter_conversations(limit=1))
    assert list(client.iter_history(conversation, limit=1)) == window.messages
    page = client.history(conversation, limit=1)  # the system message comes with the first page
    assert page.messages == window.messages[:2]
    assert page.next_cursor is not None
    rest = client.history(conversation, limit=5, cursor=page.next_cursor)
    assert (rest.messages, rest.next_cursor) == (window.messages[2:], None)
    assert "openapi" in client.openapi()
    assert "chatmem" in client.metrics()
    client.delete_conversation(conversation)
    with pytest.raises(chatmem.NotFoundError) as e:
        client.get_messages(conversation)
    assert (e.value.status, e.value.code) == (404, "not_found")
    assert e.value.request_id


def order_record(n: int) -> str:
    """A tool result of some size: order `n`'s record, as JSON text."""
    return json.dumps({"order": n, "lines": [{"sku": f"SKU-{n}-{i}", "qty": i} for i in range(30)]})


def tool_turn() -> list[Message]:
    """A question and two `get_order` uses (calls 1 and 2) answered with their records."""
    turn: list[Message] = [{"role": "user", "content": "Where are my orders?"}]
    for n in (1, 2):
        call: chatmem.ToolCall = {
            "id": f"call_{n}",
            "type": "function",
            "function": {"name": "get_order", "arguments": "{}"},
        }
        turn.append({"role": "assistant", "content": None, "tool_calls": [call]})
        turn.append({"role": "tool", "tool_call_id": f"call_{n}", "content": order_record(n)})
    return turn


def test_a_policy_with_clearing_round_trips(client: Client, conversation: str) -> None:
    # Two tool uses with results of some size: clearing keeps the most recent whole.
    turn = tool_turn()
    policy: chatmem.Policy = {
        "clear_tool_results": {"keep": 1, "trigger_tokens": 10, "exclude_tools": ["other"]}
    }
    window = client.add_messages(conversation, turn, policy=policy)
    sent = [m for m in window.messages if m["role"] == "tool"]
    assert str(sent[0]["content"]).startswith("[cleared: get_order result for call call_1, ")
    assert sent[1]["content"] == order_record(2)
    # The same policy as a query, with `clear_inputs`; without one the server's, whole.
    read = client.get_messages(
        conversation,
        policy={
            **policy,
            "clear_tool_results": {**policy["clear_tool_results"], "clear_inputs": True},
        },
    )
    assert read.messages[1]["tool_calls"][0]["function"]["arguments"] == "{}"
    assert str(read.messages[2]["content"]).startswith("[cleared: ")
    assert client.get_messages(conversation).messages[2]["content"] == order_record(1)
    assert list(client.iter_history(conversation))[2]["content"] == order_record(1)
    with pytest.raises(chatmem.BadRequestError) as e:
        client.get_messages(conversation, policy={"clear_tool_results": {"keep": 0}})
    assert "clear_tool_results.keep" in str(e.value)


def test_a_prompt_dry_run_commits_nothing(client: Client, conversation: str) -> None:
    stored = client.add_messages(conversation, [{"role": "system", "content": "售后"}, *TURN])
    ask: Message = {"role": "user", "content": "那单能退吗？"}
    prompt = client.prompt(conversation, [ask])
    assert prompt.conversation == conversation
    assert prompt.messages == [*stored.messages, ask]
    assert prompt.already_stored == 0
    assert prompt.tokens > 0
    assert prompt.cleared == chatmem.Cleared(results=0, inputs=0, tokens_saved=0)
    # Resent whole, the stored messages are left out; a request's own policy applies.
    resent = client.prompt(conversation, [*stored.messages, ask], policy={"max_messages": 2})
    assert resent.already_stored == 2
    assert resent.messages == [stored.messages[0], ask]
    assert client.get_messages(conversation).messages == stored.messages
    assert list(client.iter_history(conversation)) == stored.messages
    # A conversation that does not exist yet: the prompt is the new messages, nothing written.
    fresh = f"{conversation}-new"
    assert client.prompt(fresh, [ask]).messages == [ask]
    with pytest.raises(chatmem.NotFoundError):
        client.get_messages(fresh)
    with pytest.raises(chatmem.BadRequestError) as e:
        client.prompt(conversation, [{"role": "wizard", "content": "x"}])  # type: ignore[typeddict-item]
    assert "messages[0].role" in e.value.message


def test_a_prompt_shows_what_clearing_takes_out(proxy: Proxy, conversation: str) -> None:
    turn = tool_turn()
    turn.append({"role": "assistant", "content": "Both ship today."})
    ask: Message = {"role": "user", "content": "And the first one?"}
    policy: chatmem.Policy = {"clear_tool_results": {"keep": 1, "trigger_tokens": 10}}
    with proxy.server.client() as c:
        c.add_messages(conversation, turn)
        plain = c.prompt(conversation, [ask])
        prompt = c.prompt(conversation, [ask], policy=policy)
        assert prompt.cleared.results == 1
        assert prompt.cleared.tokens_saved > 0
        assert prompt.tokens < plain.tokens
        assert str(prompt.messages[2]["content"]).startswith("[cleared: get_order result for ")
        assert prompt.messages[4]["content"] == order_record(2)
        assert list(c.iter_history(conversation))[2]["content"] == order_record(1)
        # Without a policy, the prompt is what the door then sends upstream.
        c.chat_completion(conversation, {"model": "fake-model", "messages": [ask]})
        assert proxy.received[-1]["messages"] == plain.messages


def test_routes_without_an_upstream_answer_503(client: Client, conversation: str) -> None:
    with pytest.raises(chatmem.ServerError) as e:
        client.models()
    assert e.value.status == 503
    with pytest.raises(chatmem.ServerError) as e:
        client.chat_completion(conversation, {"model": "m", "messages": [TURN[0]]})
    assert e.value.status == 503
    assert e.value.code == "no_upstream"
    with pytest.raises(chatmem.NotFoundError):
        client.get_messages(conversation)


def test_chat_completion_with_memory_and_models(proxy: Proxy, conversation: str) -> None:
    with proxy.server.client() as c:
        assert [m["id"] for m in c.models()["data"]] == ["fake-model"]
        first = c.chat_completion(conversation, {"model": "fake-model", "messages": [TURN[0]]})
        later = c.chat_completion(
            conversation,
            {"model": "fake-model", "messages": [{"role": "user", "content": "那单能退吗？"}]},
        )
        assert first["choices"][0]["message"]["content"] == "LC202610060018 未发货，可以退。"
        assert later["choices"][0]["message"]["content"] == "LC202610060018 未发货，可以退。"
        # the model received the stored turn with the new question: memory's window
        assert proxy.received[-1]["messages"][0] == TURN[0]
        assert [m["role"] for m in c.get_messages(conversation).messages] == [
            "user",
            "assistant",
        ] * 2
        with pytest.raises(ValueError, match="stream"):
            c.chat_completion(conversation, {"model": "m", "messages": [], "stream": True})
        with pytest.raises(chatmem.BadRequestError) as e:
            c.chat_completion(conversation, {"model": "m", "messages": [TURN[0]], "n": 2})
        assert "n" in e.value.message


def test_the_door_takes_any_conversation_id_a_header_can_carry(proxy: Proxy) -> None:
    conversation = f"订单-{uuid.uuid4().hex}"  # sent as UTF-8 in X-Chatmem-Conversation
    with proxy.server.client() as c:
        c.chat_completion(conversation, {"model": "fake-model", "messages": [TURN[0]]})
        assert c.get_messages(conversation).messages[0] == TURN[0]
        count = len(proxy.received)
        for bad in ("bad\nid", " padded", "tab\t"):
            with pytest.raises(ValueError, match="X-Chatmem-Conversation header"):
                c.chat_completion(bad, {"model": "fake-model", "messages": [TURN[0]]})
        assert len(proxy.received) == count
        c.delete_conversation(conversation)


def test_url_and_token_from_the_environment(
    server: Server, conversation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHATMEM_URL", server.url)
    monkeypatch.setenv("CHATMEM_TOKEN", server.token_b)
    with Client() as from_env:
        from_env.add_messages(conversation, TURN)
    with server.client(server.token_b) as b:
        assert b.get_messages(conversation).messages == TURN


def test_a_bad_id_raises_the_servers_error_and_writes_nothing(client: Client) -> None:
    before = list(client.iter_conversations())
    with pytest.raises(chatmem.BadRequestError) as e:
        client.add_messages("bad\nid", TURN)
    assert (e.value.status, e.value.code) == (400, "invalid_request")
    assert "control character" in e.value.message
    assert e.value.type == "invalid_request_error"
    assert e.value.request_id
    with pytest.raises(chatmem.RequestTooLargeError) as e2:
        client.add_messages("x" * 192, TURN)
    assert (e2.value.status, e2.value.code) == (413, "too_large")
    assert list(client.iter_conversations()) == before


def test_an_oversized_message_raises_413_and_the_batch_is_not_written(
    client: Client, conversation: str
) -> None:
    client.add_messages(conversation, TURN)
    big: Message = {"role": "user", "content": "x" * (256 * 1024 + 1)}
    with pytest.raises(chatmem.RequestTooLargeError) as e:
        client.add_messages(conversation, [{"role": "user", "content": "fits"}, big])
    assert (e.value.status, e.value.code) == (413, "too_large")
    assert e.value.request_id
    assert list(client.iter_history(conversation)) == TURN


def test_a_bad_role_names_the_field(client: Client, conversation: str) -> None:
    with pytest.raises(chatmem.BadRequestError) as e:
        client.add_messages(conversation, [{"role": "robot", "content": "x"}])  # type: ignore[typeddict-item]
    assert "messages[0].role" in e.value.message
    with pytest.raises(chatmem.NotFoundError):
        client.history(conversation)


def test_tenants_stay_apart(server: Server, conversation: str) -> None:
    with server.client(server.token_a) as a, server.client(server.token_b) as b:
        a.add_messages(conversation, TURN)
        with pytest.raises(chatmem.NotFoundError):
            b.get_messages(conversation)
        assert conversation not in list(b.iter_conversations())
        b.add_messages(conversation, [{"role": "user", "content": "B's own"}])
        assert a.get_messages(conversation).messages == TURN
        b.delete_conversation(conversation)
        assert a.get_messages(conversation).messages == TURN
        assert conversation in list(a.iter_conversations())


def test_a_missing_or_unknown_token_is_401(server: Server) -> None:
    for token in ("", "not-a-token-of-this-server"):
        with (
            Client(server.url, token=token) as anonymous,
            pytest.raises(chatmem.AuthenticationError) as e,
        ):
            anonymous.list_conversations()
        assert (e.value.status, e.value.code) == (401, "unauthorized")


def test_a_token_that_is_not_ascii_is_refused_before_any_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for token in ("tökén-secret", "two words", "tab\there"):
        with pytest.raises(ValueError, match="token argument has a character") as e:
            Client("http://127.0.0.1:1", token=token)
        assert "secret" not in str(e.value)
        with pytest.raises(ValueError, match="token argument"):
            AsyncClient("http://127.0.0.1:1", token=token)
    monkeypatch.setenv("CHATMEM_TOKEN", "jetón")
    with pytest.raises(ValueError, match="CHATMEM_TOKEN has a character that is not printable"):
        Client("http://127.0.0.1:1")


def test_the_ids_dot_and_dot_dot_are_conversations_like_any_other(client: Client) -> None:
    for conversation in (".", ".."):
        assert client.add_messages(conversation, TURN).messages == TURN
        assert client.get_messages(conversation).messages == TURN
        assert list(client.iter_history(conversation)) == TURN
        assert conversation in list(client.iter_conversations())
        client.delete_conversation(conversation)
        with pytest.raises(chatmem.NotFoundError):
            client.get_messages(conversation)


def test_an_unreachable_server_is_a_transport_error() -> None:
    with Client("http://127.0.0.1:1", timeout=2) as c, pytest.raises(chatmem.TransportError):
        c.health()


def test_two_processes_writing_one_conversation_lose_and_interleave_nothing(
    server: Server, conversation: str
) -> None:
    turns = 25
    writers = [
        subprocess.Popen(
            [
                sys.executable,
                str(HERE / "writer.py"),
                server.url,
                server.token_a,
                conversation,
                name,
                str(turns),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for name in ("p", "q")
    ]
    for w in writers:
        _, err = w.communicate(timeout=120)
        assert w.returncode == 0, err.decode()
    with server.client() as c:
        stored = list(c.iter_history(conversation, limit=7))
    assert len(stored) == 2 * 2 * turns
    for i in range(0, len(stored), 2):
        user, answer = stored[i], stored[i + 1]
        assert user["role"] == "user"
        assert answer == {"role": "assistant", "content": f"{user['content']} ok"}
    for name in ("p", "q"):
        mine = [
            m["content"] for m in stored if m["role"] == "user" and str(m["content"])[0] == name
        ]
        assert mine == [f"{name}-{i}" for i in range(turns)]


@pytest.mark.anyio
async def test_async_client(server: Server, conversation: str) -> None:
    async with AsyncClient(server.url, token=server.token_a) as c:
        assert await c.health() == {"status": "ok"}
        await c.add_messages(conversation, TURN[:1])
        window = await c.add_messages(conversation, TURN[1:])
        assert window.messages == TURN
        assert (await c.get_messages(conversation)).messages == TURN
        prompt = await c.prompt(conversation, [TURN[0]])
        assert (prompt.messages, prompt.already_stored) == ([*TURN, TURN[0]], 0)
        assert (await c.get_messages(conversation)).messages == TURN
        assert [m async for m in c.iter_history(conversation, limit=1)] == TURN
        assert conversation in [i async for i in c.iter_conversations(limit=2)]
        with pytest.raises(chatmem.BadRequestError) as e:
            await c.get_messages(conversation, policy={"max_messages": 0})
        assert e.value.status == 400
        assert e.value.request_id
        await c.delete_conversation(conversation)
        with pytest.raises(chatmem.NotFoundError):
            await c.delete_conversation(conversation)
