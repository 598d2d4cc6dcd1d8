"""Users' facts through both clients against a real ``chatmem serve`` (SQLite and PostgreSQL):
every route, a key superseding, pins and their bound, the server's refusals, tenants, hostile
user ids, and turns naming their user (``--facts``: the model is sent the user's facts)."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterator

import httpx
import pytest

import chatmem
from chatmem import AsyncClient, Client, Fact, FactChange, Facts, FactSource, Message

from .conftest import Proxy, Server

HEADING = "What is known about the user (kept across conversations):"


@pytest.fixture
def user(server: Server) -> Iterator[str]:
    """A new user id, with a ``/`` in it (sent as ``%2F``); forgotten for both tenants after
    the test, so a shared database keeps nothing of it."""
    uid = f"ada/{uuid.uuid4().hex}"
    yield uid
    for token in (server.token_a, server.token_b):
        with server.client(token) as c:
            c.forget_user(uid)


def kinds(history: list[FactChange]) -> list[str]:
    return [c.kind for c in history]


def test_every_route_add_list_supersede_edit_pin_history_delete_forget(
    client: Client, user: str
) -> None:
    assert client.list_facts(user) == Facts(facts=[], version=0)
    city = client.add_fact(user, "Lives in Berlin", key="home.city")
    assert isinstance(city, Fact)
    assert (city.text, city.key, city.pinned, city.sources) == (
        "Lives in Berlin",
        "home.city",
        False,
        [],
    )
    assert None not in (city.created, city.updated, city.confirmed)  # RFC 3339 times
    tea = client.add_fact(user, "Likes green tea")
    assert tea.key is None
    assert tea.id != city.id

    # A key supersedes: a new fact, the old one kept in its history.
    moved = client.add_fact(user, "Lives in Hamburg", key="home.city")
    assert moved.id not in (city.id, tea.id)
    listed = client.list_facts(user)
    assert [f.text for f in listed.facts] == ["Lives in Hamburg", "Likes green tea"]
    history = client.fact_history(user, city.id)
    assert kinds(history) == ["added", "superseded"]
    assert (history[0].text, history[0].key, history[0].fact) == (
        "Lives in Berlin",
        "home.city",
        city.id,
    )
    assert (history[1].by, history[1].text) == (moved.id, "Lives in Berlin")
    assert all(c.cause == {"by": "hand"} and c.when for c in history)
    added = client.fact_history(user, moved.id)[0]
    assert (added.kind, added.supersedes, added.key) == ("added", city.id, "home.city")

    # The same text (case and punctuation aside) confirms the current fact.
    again = client.add_fact(user, "lives in hamburg!")
    assert (again.id, again.text) == (moved.id, "Lives in Hamburg")
    assert kinds(client.fact_history(user, moved.id)) == ["added", "confirmed"]

    # An edit and a pin in one PATCH; pinned facts are listed (and sent) first.
    pinned = client.edit_fact(user, tea.id, text="Likes black tea", pinned=True)
    assert (pinned.id, pinned.text, pinned.pinned, pinned.key) == (
        tea.id,
        "Likes black tea",
        True,
        None,
    )
    after = client.list_facts(user)
    assert [f.text for f in after.facts] == ["Likes black tea", "Lives in Hamburg"]
    assert after.version > listed.version > 0
    assert kinds(client.fact_history(user, tea.id)) == ["added", "edited", "pinned"]
    # Left out, the key stays; None removes it; unpinning is a change of its own.
    kept = client.edit_fact(user, moved.id, text="Lives in Hamburg-Altona")
    assert (kept.text, kept.key) == ("Lives in Hamburg-Altona", "home.city")
    assert client.edit_fact(user, moved.id, key=None).key is None
    assert client.edit_fact(user, moved.id, key="home.city").key == "home.city"
    assert client.edit_fact(user, tea.id, pinned=False).pinned is False
    assert kinds(client.fact_history(user, tea.id))[-1] == "unpinned"

    # Deleting a fact deletes the facts it superseded, histories and all.
    client.delete_fact(user, moved.id)
    assert [f.id for f in client.list_facts(user).facts] == [tea.id]
    for gone in (moved.id, city.id):
        with pytest.raises(chatmem.NotFoundError) as e:
            client.fact_history(user, gone)
        assert (e.value.status, e.value.code) == (404, "not_found")
    with pytest.raises(chatmem.NotFoundError):
        client.delete_fact(user, moved.id)

    client.forget_user(user)
    assert client.list_facts(user) == Facts(facts=[], version=0)
    with pytest.raises(chatmem.NotFoundError):
        client.fact_history(user, tea.id)
    client.forget_user(user)  # nothing kept: no error either


def test_the_servers_refusals_name_what_is_wrong_and_write_nothing(
    client: Client, user: str
) -> None:
    city = client.add_fact(user, "Lives in Berlin", key="home.city")
    tea = client.add_fact(user, " Likes\n green\ttea ")  # a fact is one line: whitespace folded
    assert tea.text == "Likes green tea"
    before = client.list_facts(user)
    for text in ("", " \n\t ", "bell\x07", "zero\u200bwidth", "x" * 501):
        with pytest.raises(chatmem.BadRequestError) as e:
            client.add_fact(user, text)
        assert (e.value.status, e.value.param) == (400, "text"), repr(text)
    with pytest.raises(chatmem.BadRequestError) as e:
        client.add_fact(user, "Has a cat", key="Pets Owned")
    assert e.value.param == "key"
    with pytest.raises(chatmem.BadRequestError) as e:
        client.edit_fact(user, tea.id, text="")
    assert e.value.param == "text"
    # A key another current fact has: 409 fact_refused, naming the key.
    with pytest.raises(chatmem.ConflictError) as c:
        client.edit_fact(user, tea.id, key="home.city")
    assert (c.value.status, c.value.code, c.value.param) == (409, "fact_refused", "key")
    assert str(city.id) in c.value.message
    assert client.list_facts(user) == before
    # No such fact, and ids that cannot be one.
    unknown = max(city.id, tea.id) + 1000
    with pytest.raises(chatmem.NotFoundError):
        client.edit_fact(user, unknown, pinned=True)
    with pytest.raises(chatmem.NotFoundError):
        client.delete_fact(user, unknown)
    with pytest.raises(chatmem.NotFoundError):
        client.fact_history(user, unknown)
    for bad in (0, -1):
        with pytest.raises(chatmem.BadRequestError) as e:
            client.fact_history(user, bad)
        assert e.value.param == "fact"
    # Refused before any request: nothing to change, and ids of the wrong type.
    with pytest.raises(ValueError, match="changes nothing"):
        client.edit_fact(user, tea.id)
    with pytest.raises(TypeError, match="fact id is an int"):
        client.delete_fact(user, "1/../../x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="fact id is an int"):
        client.fact_history(user, True)
    with pytest.raises(TypeError, match="user id is a str"):
        client.list_facts(42)  # type: ignore[arg-type]
    assert client.list_facts(user) == before


def pinned_texts(n: int) -> list[str]:
    """``n`` distinct fact texts of some tokens each (hex: many tokens per byte)."""
    return [f"Note {i}: {secrets.token_hex(100)}" for i in range(n)]


def test_pins_stop_at_the_bound_and_an_edit_refused_by_it_writes_nothing(
    client: Client, user: str
) -> None:
    # Pinned facts never leave, so they may not take more than the user's facts' tokens: each
    # fact pinned as it is added, until the next one finds no room.
    refused: chatmem.ConflictError | None = None
    pinned: list[Fact] = []
    for text in pinned_texts(200):
        try:
            fact = client.add_fact(user, text)
            pinned.append(client.edit_fact(user, fact.id, pinned=True))
        except chatmem.ConflictError as e:
            refused = e
            break
    assert refused is not None, "200 long pinned facts fit"
    assert (refused.code, len(pinned) > 1) == ("fact_refused", True)
    facts = client.list_facts(user).facts
    assert [f.id for f in facts] == [f.id for f in pinned]
    assert all(f.pinned for f in facts)
    # Lengthening a pinned fact past the bound is refused, and nothing is written.
    longer = pinned[0].text + " " + secrets.token_hex(140)  # more than a new fact's tokens
    with pytest.raises(chatmem.ConflictError) as past:
        client.edit_fact(user, pinned[0].id, text=longer)
    assert past.value.code == "fact_refused"
    assert "pinned" in past.value.message
    assert client.list_facts(user).facts == facts
    # Unpinned, the fact is an ordinary one again: room for a new fact, which the bound may
    # then make the unpinned one leave for.
    client.edit_fact(user, pinned[0].id, pinned=False)
    assert not client.list_facts(user).facts[-1].pinned


def test_tenants_keep_their_users_facts_apart(server: Server, user: str) -> None:
    with server.client(server.token_a) as a, server.client(server.token_b) as b:
        mine = a.add_fact(user, "Allergic to nuts")
        assert b.list_facts(user) == Facts(facts=[], version=0)
        with pytest.raises(chatmem.NotFoundError):
            b.fact_history(user, mine.id)
        with pytest.raises(chatmem.NotFoundError):
            b.edit_fact(user, mine.id, text="Not allergic")
        with pytest.raises(chatmem.NotFoundError):
            b.delete_fact(user, mine.id)
        b.add_fact(user, "B's own fact")
        b.forget_user(user)
        assert [f.text for f in a.list_facts(user).facts] == ["Allergic to nuts"]


def test_hostile_user_ids_are_one_path_segment_or_the_servers_400(
    client: Client, user: str, server: Server
) -> None:
    # Each of these is a user of its own: not a path that reaches another user or route.
    hostile = [f"{user}/../b", f"../{user}", "..", ".", f"{user}?x=1#y", f"{user}%2Fz", "用户 42"]
    for uid in hostile:
        client.add_fact(uid, f"The fact of {uid!r}")
    try:
        for uid in hostile:
            assert [f.text for f in client.list_facts(uid).facts] == [f"The fact of {uid!r}"]
        assert client.list_facts(f"{user}/b").facts == []
        assert client.list_facts(user).facts == []
    finally:
        for uid in hostile:
            client.forget_user(uid)
    for uid in ("bad\nid", "", "zero\u200bwidth"):
        with pytest.raises(chatmem.BadRequestError) as e:
            client.list_facts(uid)
        assert (e.value.status, e.value.param) == (400, "user"), repr(uid)
    with pytest.raises(chatmem.RequestTooLargeError) as big:
        client.add_fact("u" * 1000, "Too long a user")
    assert (big.value.status, big.value.param) == (413, "user")


def test_a_turn_naming_its_user_is_sent_their_facts(
    client: Client, user: str, conversation: str
) -> None:
    client.add_fact(user, "Allergic to nuts")
    client.add_fact(user, "Lives in Hamburg", key="home.city")
    ask: Message = {"role": "user", "content": "What should I cook?"}
    facts_message: Message = {
        "role": "user",
        "content": f"{HEADING}\n- Lives in Hamburg\n- Allergic to nuts",
    }
    assert client.prompt(conversation, [ask], user=user).messages == [facts_message, ask]
    assert client.prompt(conversation, [ask]).messages == [ask]  # nobody's turn: none
    window = client.add_messages(conversation, [ask], user=user)
    assert window.messages == [ask]  # the facts are sent, never stored
    assert list(client.iter_history(conversation)) == [ask]
    with pytest.raises(chatmem.BadRequestError) as e:
        client.add_messages(conversation, [ask], user="bad\nid")
    assert e.value.param == "user"
    with pytest.raises(chatmem.BadRequestError) as e:
        client.prompt(conversation, [ask], user="")
    assert e.value.param == "user"
    assert list(client.iter_history(conversation)) == [ask]


def test_the_door_sends_the_named_users_facts_upstream(
    facts_proxy: Proxy, conversation: str
) -> None:
    uid = f"顾客/{uuid.uuid4().hex}"  # not ASCII: sent as UTF-8 in X-Chatmem-User
    ask: Message = {"role": "user", "content": "我的订单是 LC202610060018，还没发货。"}
    with facts_proxy.server.client() as c:
        c.add_fact(uid, "Prefers replies in Chinese")
        c.chat_completion(conversation, {"model": "fake-model", "messages": [ask]}, user=uid)
        sent = facts_proxy.received[-1]["messages"]
        assert sent[0] == {"role": "user", "content": f"{HEADING}\n- Prefers replies in Chinese"}
        assert sent[1:] == [ask]
        c.chat_completion(conversation, {"model": "fake-model", "messages": [ask]})
        assert all(HEADING not in str(m["content"]) for m in facts_proxy.received[-1]["messages"])
        with pytest.raises(chatmem.BadRequestError) as e:
            c.chat_completion(conversation, {"model": "m", "messages": [ask]}, user="")
        assert e.value.param == "X-Chatmem-User"
        count = len(facts_proxy.received)
        for bad in ("bad\nid", " padded", "tab\t"):
            with pytest.raises(ValueError, match="X-Chatmem-User"):
                c.chat_completion(conversation, {"model": "m", "messages": [ask]}, user=bad)
        assert len(facts_proxy.received) == count
        c.forget_user(uid)


def test_a_fact_is_read_as_the_server_writes_it_unknown_fields_aside() -> None:
    # The server's JSON for a fact read from a conversation, with a field a newer server
    # might add: the fields are read, the new one ignored.
    fact = {
        "id": 7,
        "text": "Allergic to nuts",
        "key": None,
        "sources": [{"conversation": "c/1", "seq": 3}, {"conversation": "c/2", "seq": 0}],
        "created": "2026-12-07T10:00:00Z",
        "updated": "2026-12-07T11:00:00Z",
        "confirmed": "2026-12-07T11:00:00Z",
        "pinned": True,
        "weight": 0.5,
    }
    change = {
        "fact": 7,
        "kind": "confirmed",
        "when": "2026-12-07T11:00:00Z",
        "cause": {"by": "extraction", "conversation": "c/2"},
        # Another tenant's conversation (which cannot be) is named null: left out.
        "sources": [{"conversation": "c/2", "seq": 0}, {"conversation": None, "seq": 9}],
        "key": None,
        "novel": True,
    }

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/history"):
            return httpx.Response(200, json={"history": [change]})
        return httpx.Response(200, json={"facts": [fact], "version": 4, "etag": "x"})

    transport = httpx.MockTransport(answer)
    with Client("http://chatmem.test", http_client=httpx.Client(transport=transport)) as c:
        listed = c.list_facts("u")
        (history,) = c.fact_history("u", 7)
    assert listed.version == 4
    (read,) = listed.facts
    assert read.sources == [FactSource("c/1", 3), FactSource("c/2", 0)]
    assert read.sources[0] == ("c/1", 3)  # a source is a (conversation, seq) pair
    assert (read.id, read.pinned, read.key, read.created) == (7, True, None, fact["created"])
    assert history == FactChange(
        fact=7,
        kind="confirmed",
        when="2026-12-07T11:00:00Z",
        cause={"by": "extraction", "conversation": "c/2"},
        sources=[FactSource("c/2", 0)],
    )


@pytest.mark.anyio
async def test_async_facts(server: Server, user: str, conversation: str) -> None:
    async with AsyncClient(server.url, token=server.token_a) as c:
        assert await c.list_facts(user) == Facts(facts=[], version=0)
        city = await c.add_fact(user, "Lives in Berlin", key="home.city")
        moved = await c.add_fact(user, "Lives in Hamburg", key="home.city")
        assert kinds(await c.fact_history(user, city.id)) == ["added", "superseded"]
        edited = await c.edit_fact(user, moved.id, text="Lives in Bremen", key=None, pinned=True)
        assert (edited.text, edited.key, edited.pinned) == ("Lives in Bremen", None, True)
        assert [f.id for f in (await c.list_facts(user)).facts] == [moved.id]
        ask: Message = {"role": "user", "content": "Where do I live?"}
        prompt = await c.prompt(conversation, [ask], user=user)
        assert prompt.messages[0]["content"] == f"{HEADING}\n- Lives in Bremen"
        await c.add_messages(conversation, [ask], user=user)
        work = await c.add_fact(user, "Works in Bremen", key="work.city")
        with pytest.raises(chatmem.ConflictError) as refused:
            await c.edit_fact(user, moved.id, key="work.city")
        assert (refused.value.code, refused.value.param) == ("fact_refused", "key")
        await c.delete_fact(user, work.id)
        with pytest.raises(chatmem.NotFoundError):
            await c.delete_fact(user, moved.id + 100)
        with pytest.raises(chatmem.BadRequestError) as e:
            await c.list_facts("bad\nid")
        assert e.value.param == "user"
        with pytest.raises(ValueError, match="changes nothing"):
            await c.edit_fact(user, moved.id)
        await c.delete_fact(user, moved.id)
        with pytest.raises(chatmem.NotFoundError):
            await c.fact_history(user, city.id)
        await c.add_fact(user, "Likes green tea")
        await c.forget_user(user)
        assert await c.list_facts(user) == Facts(facts=[], version=0)
