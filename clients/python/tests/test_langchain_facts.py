"""A user's facts through the LangChain adapters, against a real ``chatmem serve --facts``:
``ChatmemChatMessageHistory(user=)`` under ``RunnableWithMessageHistory`` and
``ChatmemMiddleware(user=)`` in ``create_agent`` send the model the user's facts (added by hand)
right after the system message; without a user nothing changes; the facts message is never
stored, however often what was read is written back; every write names the user."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

import chatmem
from chatmem import AsyncClient, Client, Message, Policy
from chatmem._facts import with_facts
from chatmem.langchain import FACTS_KEY, ChatmemChatMessageHistory, from_chatmem, is_facts
from chatmem.langchain_agent import ChatmemMiddleware

from .conftest import FACT, FACTS, Server
from .conftest import FACTS_HEADING as HEADING
from .test_langchain import RecordingChatModel
from .upstream_agent import says, scripted_model, text_of

SYSTEM = "You are the after-sale desk."


def _stored(client: Client, conversation: str) -> list[Message]:
    return list(client.iter_history(conversation))


def _plain(messages: list[BaseMessage]) -> list[tuple[str, Any]]:
    """What a model reads of each message (the model's answers carry run ids)."""
    return [(m.type, m.content) for m in messages]


def _has_facts_text(messages: list[Message]) -> bool:
    return any(HEADING in text_of(dict(m)) for m in messages)


def _chain(client: Client, model: RecordingChatModel, user: str | None) -> Any:
    prompt = ChatPromptTemplate.from_messages(
        [MessagesPlaceholder("history"), ("human", "{question}")]
    )
    return RunnableWithMessageHistory(
        prompt | model,
        lambda session_id: ChatmemChatMessageHistory(session_id, client=client, user=user),
        input_messages_key="question",
        history_messages_key="history",
    )


def _two_turns(client: Client, conversation: str, user: str | None) -> list[list[BaseMessage]]:
    ChatmemChatMessageHistory(conversation, client=client).add_messages([SystemMessage(SYSTEM)])
    model = RecordingChatModel(messages=iter([AIMessage("Noted."), AIMessage("No nuts, then.")]))
    chain = _chain(client, model, user)
    config: Any = {"configurable": {"session_id": conversation}}
    chain.invoke({"question": "Dessert ideas?"}, config=config)
    chain.invoke({"question": "Something with almonds?"}, config=config)
    return model.received


def test_a_history_with_a_user_sends_their_facts_and_never_stores_them(
    client: Client, conversation: str, user: str
) -> None:
    first, second = _two_turns(client, conversation, user)
    for sent in (first, second):
        assert sent[0] == SystemMessage(SYSTEM)
        assert sent[1] == HumanMessage(FACTS, additional_kwargs={FACTS_KEY: True})
        assert is_facts(sent[1])
        assert sum(is_facts(m) for m in sent) == 1
    assert _plain(second[2:]) == [
        ("human", "Dessert ideas?"),
        ("ai", "Noted."),
        ("human", "Something with almonds?"),
    ]
    stored = _stored(client, conversation)
    assert _plain([from_chatmem(m) for m in stored]) == [
        ("system", SYSTEM),
        ("human", "Dessert ideas?"),
        ("ai", "Noted."),
        ("human", "Something with almonds?"),
        ("ai", "No nuts, then."),
    ]
    assert not _has_facts_text(stored)


class AddsAFact(RecordingChatModel):
    """A model that, while it answers, has a facts model land the user's first fact."""

    adds: Any = None

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        if self.adds is not None:
            self.adds()
        return super()._generate(messages, *args, **kwargs)


def test_a_fact_landing_during_a_turn_loses_no_message(
    server: Server, client: Client, conversation: str
) -> None:
    # Without history_messages_key, RunnableWithMessageHistory cuts the history off the turn's
    # input by the length of a second read: a facts message appearing between the two reads
    # would cut the question off too.
    uid = f"ada/{uuid.uuid4().hex}"
    ChatmemChatMessageHistory(conversation, client=client).add_messages([SystemMessage(SYSTEM)])
    model = AddsAFact(messages=iter([AIMessage("Noted."), AIMessage("No nuts, then.")]))
    model.adds = lambda: client.add_fact(uid, FACT)
    chain = RunnableWithMessageHistory(
        model, lambda sid: ChatmemChatMessageHistory(sid, client=client, user=uid)
    )
    config: Any = {"configurable": {"session_id": conversation}}
    try:
        chain.invoke([HumanMessage("Dessert ideas?")], config=config)
        model.adds = None
        chain.invoke([HumanMessage("Something with almonds?")], config=config)
    finally:
        client.forget_user(uid)
    assert [(m["role"], text_of(dict(m))) for m in _stored(client, conversation)] == [
        ("system", SYSTEM),
        ("user", "Dessert ideas?"),
        ("assistant", "Noted."),
        ("user", "Something with almonds?"),
        ("assistant", "No nuts, then."),
    ]
    # The fact that landed during the first turn reached the second.
    assert _plain(model.received[1])[1] == ("human", FACTS)


def test_a_history_without_a_user_sends_no_facts(
    client: Client, conversation: str, user: str
) -> None:
    first, second = _two_turns(client, conversation, None)
    assert first == [SystemMessage(SYSTEM), HumanMessage("Dessert ideas?")]
    assert not any(is_facts(m) or HEADING in str(m.content) for m in second)
    history = ChatmemChatMessageHistory(conversation, client=client)
    assert history.messages == [from_chatmem(m) for m in client.get_messages(conversation).messages]


def test_reading_and_writing_back_keeps_the_facts_out(
    client: Client, conversation: str, user: str
) -> None:
    history = ChatmemChatMessageHistory(conversation, client=client, user=user)
    assert history.messages == [HumanMessage(FACTS, additional_kwargs={FACTS_KEY: True})]
    history.add_messages(history.messages)  # the facts alone: nothing to write
    with pytest.raises(chatmem.NotFoundError):
        client.get_messages(conversation)
    history.add_messages([SystemMessage(SYSTEM), HumanMessage("hi", id="m1"), AIMessage("yo")])
    before = _stored(client, conversation)
    for _ in range(3):  # read, rewrite whole: the conversation comes back byte for byte
        read = history.messages
        assert [is_facts(m) for m in read] == [False, True, False, False]
        history.clear()
        history.add_messages(read)
        assert _stored(client, conversation) == before
    assert not _has_facts_text(before)


def test_under_a_token_window_the_facts_take_the_oldest_messages_room(
    client: Client, conversation: str, user: str
) -> None:
    policy: Policy = {"max_tokens": 120}
    turns: list[BaseMessage] = [
        (HumanMessage if i % 2 == 0 else AIMessage)(f"message number {i} " * 3) for i in range(10)
    ]
    ChatmemChatMessageHistory(conversation, client=client).add_messages(
        [SystemMessage(SYSTEM), *turns]
    )
    plain = ChatmemChatMessageHistory(conversation, client=client, policy=policy).messages
    with_user = ChatmemChatMessageHistory(
        conversation, client=client, policy=policy, user=user
    ).messages
    prompt = client.prompt(conversation, [], policy=policy, user=user)
    assert with_user[0] == plain[0] == SystemMessage(SYSTEM)
    assert is_facts(with_user[1])
    window = with_user[2:]
    assert 0 < len(window) < len(plain) - 1  # the facts took room
    assert window == plain[len(plain) - len(window) :]  # the newest kept, as the server sends
    assert len(with_user) == len(prompt.messages)


def test_a_stored_copy_of_the_facts_is_a_message_of_the_conversation(
    client: Client, conversation: str
) -> None:
    # a user without facts: the copy in the prompt's facts place is the window's own message
    nobody = f"nobody/{uuid.uuid4().hex}"
    stored: list[BaseMessage] = [SystemMessage(SYSTEM), HumanMessage(FACTS), AIMessage("ok")]
    ChatmemChatMessageHistory(conversation, client=client).add_messages(stored)
    read = ChatmemChatMessageHistory(conversation, client=client, user=nobody).messages
    assert _plain(read) == _plain(stored)
    assert not any(is_facts(m) for m in read)


def test_the_facts_go_where_the_prompt_has_them() -> None:
    system: Message = {"role": "system", "content": SYSTEM}
    facts: Message = {"role": "user", "content": FACTS}
    hi: Message = {"role": "user", "content": "hi", "metadata": {"k": 1}}
    yo: Message = {"role": "assistant", "content": "yo"}
    # another writer committed between the window's read and the prompt's
    later: list[Message] = [
        system,
        facts,
        {"role": "user", "content": "hi"},
        yo,
        {"role": "user", "content": "?"},
    ]
    assert with_facts([system, hi], later) == ([system, hi], facts)
    # the token window sent only the newest message, leaving room for the facts
    assert with_facts([system, hi, yo], [system, facts, yo]) == ([system, yo], facts)
    assert with_facts([hi, yo], [facts]) == ([], facts)
    assert with_facts([system, hi, yo], [system, {"role": "user", "content": "hi"}, yo]) == (
        [system, hi, yo],
        None,
    )


def test_every_history_write_names_the_user(client: Client, conversation: str) -> None:
    # the server refuses an empty user id, naming it: a write that sent none would pass
    history = ChatmemChatMessageHistory(conversation, client=client, user="")
    with pytest.raises(chatmem.BadRequestError, match="user"):
        history.messages  # noqa: B018 - the read's prompt names the user too
    with pytest.raises(chatmem.BadRequestError, match="user"):
        history.add_messages([HumanMessage("hi")])
    with pytest.raises(chatmem.NotFoundError):
        client.get_messages(conversation)


@pytest.mark.anyio
async def test_the_async_history_reads_facts_and_writes_without_them(
    server: Server, conversation: str, user: str
) -> None:
    async with AsyncClient(server.url, token=server.token_a, timeout=10.0) as aclient:
        history = ChatmemChatMessageHistory(
            conversation, client=server.client(), async_client=aclient, user=user
        )
        await history.aadd_messages([SystemMessage(SYSTEM), HumanMessage("hi")])
        read = await history.aget_messages()
        assert read == [
            SystemMessage(SYSTEM),
            HumanMessage(FACTS, additional_kwargs={FACTS_KEY: True}),
            HumanMessage("hi"),
        ]
        await history.aadd_messages([read[1]])  # the facts alone: nothing written
        refused = ChatmemChatMessageHistory(
            conversation, client=server.client(), async_client=aclient, user=""
        )
        with pytest.raises(chatmem.BadRequestError, match="user"):
            await refused.aadd_messages([HumanMessage("again")])
    with server.client() as c:
        assert [from_chatmem(m) for m in _stored(c, conversation)] == [
            SystemMessage(SYSTEM),
            HumanMessage("hi"),
        ]


# ---------------------------------------------------------------------------------------------
# The agent middleware


def _agent(base_url: str, middleware: ChatmemMiddleware) -> Any:
    model = ChatOpenAI(
        base_url=base_url, api_key=SecretStr("x"), model="gpt-4o-mini", max_retries=0
    )
    return create_agent(model, [], system_prompt=SYSTEM, middleware=[middleware])


def _echo(request: dict[str, Any]) -> dict[str, Any]:
    return says(f"heard: {text_of(request['messages'][-1])}")


def _ask(text: str) -> dict[str, Any]:
    return {"messages": [HumanMessage(text)]}


@pytest.mark.parametrize("by", ["argument", "config"])
def test_the_agent_is_sent_the_users_facts_and_stores_none(
    server: Server, conversation: str, user: str, by: str
) -> None:
    with scripted_model(_echo) as model, server.client() as client:
        for question in ("Dessert ideas?", "With almonds?"):  # a new agent each turn
            if by == "argument":
                middleware = ChatmemMiddleware(client=client, user=user)
                config: Any = {"configurable": {"thread_id": conversation}}
            else:
                middleware = ChatmemMiddleware(client=client)
                config = {"configurable": {"thread_id": conversation, "user_id": user}}
            _agent(model.base_url, middleware).invoke(_ask(question), config)
        first, second = model.prompts()
        assert first == [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": FACTS},
            {"role": "user", "content": "Dessert ideas?"},
        ]
        assert second[:2] == first[:2]
        assert second[2:] == [
            {"role": "user", "content": "Dessert ideas?"},
            {"role": "assistant", "content": "heard: Dessert ideas?"},
            {"role": "user", "content": "With almonds?"},
        ]
        stored = _stored(client, conversation)
        assert [(m["role"], m["content"]) for m in stored] == [
            ("system", SYSTEM),
            ("user", "Dessert ideas?"),
            ("assistant", "heard: Dessert ideas?"),
            ("user", "With almonds?"),
            ("assistant", "heard: With almonds?"),
        ]


def test_the_agent_without_a_user_is_sent_no_facts(
    server: Server, conversation: str, user: str
) -> None:
    with scripted_model(_echo) as model, server.client() as client:
        config: Any = {"configurable": {"thread_id": conversation}}
        _agent(model.base_url, ChatmemMiddleware(client=client)).invoke(_ask("Hello?"), config)
        assert model.prompts() == [
            [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Hello?"}]
        ]


def test_every_agent_commit_names_the_user(server: Server, conversation: str) -> None:
    with scripted_model(_echo) as model, server.client() as client:
        config: Any = {"configurable": {"thread_id": conversation}}
        agent = _agent(model.base_url, ChatmemMiddleware(client=client, user=""))
        with pytest.raises(chatmem.BadRequestError, match="user"):
            agent.invoke(_ask("Hello?"), config)
        assert model.received == []


@pytest.mark.anyio
async def test_the_async_agent_is_sent_the_users_facts(
    server: Server, conversation: str, user: str
) -> None:
    with scripted_model(_echo) as model, server.client() as client:
        async with AsyncClient(server.url, token=server.token_a, timeout=10.0) as aclient:
            middleware = ChatmemMiddleware(
                client=client, async_client=aclient, conversation_id=conversation, user=user
            )
            await _agent(model.base_url, middleware).ainvoke(_ask("Dessert ideas?"))
        assert model.prompts() == [
            [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": FACTS},
                {"role": "user", "content": "Dessert ideas?"},
            ]
        ]
        assert not _has_facts_text(_stored(client, conversation))
        assert len(_stored(client, conversation)) == 3
