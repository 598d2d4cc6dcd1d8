"""Recall through the clients, against a real ``chatmem serve --recall 3 --max-messages 2``:
what recall finds for a question and why, the dry run and the OpenAI door sending the recalled
order just before the question, nothing recalled stored; bad input raising the server's error."""

from __future__ import annotations

import pytest

import chatmem
from chatmem import AsyncClient, Message

from .conftest import Proxy

HEADING = "Recalled from earlier in this conversation (oldest first):"
ORDER = "我的订单是 LC202610060018，还没发货。"
QUESTION = "LC202610060018 能退吗？"
TURNS: list[Message] = [
    {"role": "user", "content": ORDER},
    {"role": "assistant", "content": "已为您催促发货。"},
    {"role": "user", "content": "谢谢"},
    {"role": "assistant", "content": "不客气"},
]


def test_recall_says_what_it_finds_and_why(recalling: Proxy, conversation: str) -> None:
    with recalling.server.client() as c:
        c.add_messages(conversation, TURNS)
        found = c.recall(conversation, QUESTION)
        assert isinstance(found, chatmem.Recall)
        assert (found.conversation, found.enabled, found.k) == (conversation, True, 3)
        assert len(found.hits) == 1
        hit = found.hits[0]
        assert isinstance(hit, chatmem.RecallHit)
        assert (hit.seq, hit.role, hit.content, hit.outcome) == (1, "user", ORDER, "injected")
        assert hit.message == {"role": "user", "content": ORDER}
        assert hit.lexical_rank == 1
        assert hit.score > 0
        assert 0.1 <= hit.relevance <= 1
        assert hit.at is not None
        assert hit.at.startswith("20")
        assert found.recalled == [hit]
        assert found.injected is not None
        injected = str(found.injected["content"])
        assert injected.startswith(HEADING + "\n[#1 user, ")
        assert injected.endswith(ORDER)
        assert found.injected_tokens > 10
        # k is the caller's; what the window holds is not recalled.
        assert c.recall(conversation, QUESTION, k=1).k == 1
        nothing = c.recall(conversation, "不客气")
        assert (nothing.hits, nothing.injected, nothing.injected_tokens) == ([], None, 0)


def test_the_dry_run_and_the_door_send_the_recalled_order(
    recalling: Proxy, conversation: str
) -> None:
    ask: Message = {"role": "user", "content": QUESTION}
    with recalling.server.client() as c:
        c.add_messages(conversation, TURNS)
        prompt = c.prompt(conversation, [ask])
        assert prompt.recalled == chatmem.Recalled(seqs=[1], tokens=prompt.recalled.tokens)
        assert prompt.recalled.tokens > 10
        assert prompt.messages[-1] == ask
        assert str(prompt.messages[-2]["content"]).startswith(HEADING)
        assert ORDER in str(prompt.messages[-2]["content"])
        assert all(ORDER not in str(m.get("content")) for m in prompt.messages[:-2])
        answer = c.chat_completion(conversation, {"model": "fake-model", "messages": [ask]})
        # The loopback model saw the order number: it came back through recall.
        assert answer["choices"][0]["message"]["content"] == "LC202610060018 未发货，可以退。"
        assert recalling.received[-1]["messages"] == prompt.messages
        stored = list(c.iter_history(conversation))
        assert stored[: len(TURNS)] == TURNS
        assert stored[len(TURNS)] == ask
        assert all(HEADING not in str(m.get("content")) for m in stored)
        assert "chatmem_recalls_total" in c.metrics()


def test_bad_recall_input_raises_the_servers_error(recalling: Proxy, conversation: str) -> None:
    with recalling.server.client() as c:
        c.add_messages(conversation, TURNS)
        for k in (0, 101):
            with pytest.raises(chatmem.BadRequestError) as e:
                c.recall(conversation, QUESTION, k=k)
            assert e.value.status == 400
            assert "`k`" in e.value.message
        with pytest.raises(chatmem.NotFoundError):
            c.recall(f"{conversation}-none", QUESTION)
        with pytest.raises(ValueError, match="q is empty"):
            c.recall(conversation, "")
        with pytest.raises(TypeError):
            c.recall(conversation, 42)  # type: ignore[arg-type]


def test_a_server_without_recall_finds_nothing(client: chatmem.Client, conversation: str) -> None:
    client.add_messages(conversation, TURNS)
    found = client.recall(conversation, QUESTION)
    assert (found.enabled, found.k, found.hits, found.injected) == (False, 5, [], None)
    assert client.prompt(conversation, []).recalled == chatmem.Recalled(seqs=[], tokens=0)


@pytest.mark.anyio
async def test_async_recall(recalling: Proxy, conversation: str) -> None:
    server = recalling.server
    async with AsyncClient(server.url, token=server.token_a) as c:
        await c.add_messages(conversation, TURNS)
        found = await c.recall(conversation, QUESTION, k=2)
        assert found.k == 2
        assert [(h.seq, h.outcome) for h in found.hits] == [(1, "injected")]
        prompt = await c.prompt(conversation, [{"role": "user", "content": QUESTION}])
        assert prompt.recalled.seqs == [1]
        with pytest.raises(chatmem.NotFoundError):
            await c.recall(f"{conversation}-none", QUESTION)
