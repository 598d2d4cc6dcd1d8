"""chatmem as the memory of a LangChain 1.x agent (``create_agent``; extra ``langchain``).

:class:`ChatmemMiddleware` wraps every model call of the agent. For the conversation (the
run's ``config["configurable"]["thread_id"]``, or ``conversation_id``) it commits the agent's
messages not stored yet, the agent's system prompt as the conversation's system message, sends
the model chatmem's window instead of the agent's whole message list, and commits the answer::

    agent = create_agent(model, tools, system_prompt="You handle after-sale questions.",
                         middleware=[ChatmemMiddleware(client=client, policy={"max_messages": 20})])
    agent.invoke({"messages": [("user", "Can that order be refunded?")]},
                 {"configurable": {"thread_id": "user-42"}})

So the prompt stays within the policy however many tool calls a turn makes, and a new agent
process on the same thread (no LangGraph checkpointer needed) remembers earlier turns. The
window never splits a tool call from its results; the middleware asks for the ``pair-safe``
boundary unless the policy names one (a turn longer than the window leaves no user message to
start on). Which messages are stored is kept in the agent's state (``chatmem_stored``, their
ids); a message without an id is given one, as LangGraph's reducer would. A failed commit
raises from the model call: nothing is lost silently.

With a user (``user``, or the run's ``config["configurable"]["user_id"]``) every commit is that
user's turn (with a facts model, their messages are read for facts) and the model is also sent
their facts, as the server's OpenAI door sends them: one user message right after the system
message (read with an empty turn's ``POST …/prompt``; a token window then sends fewer of its
oldest messages). It is in the model's request only, never in the agent's state or in chatmem.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Any

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    PrivateStateAttr,
)
from langchain_core.messages import BaseMessage, SystemMessage
from langgraph.config import get_config
from langgraph.types import Command
from typing_extensions import NotRequired

from .client import AsyncClient, Client, Message, Policy, Window
from .errors import NotFoundError
from .langchain import is_facts, to_chatmem, window_messages

__all__ = ["ChatmemMiddleware", "ChatmemState"]


class ChatmemState(AgentState[Any]):
    """The agent's state with what :class:`ChatmemMiddleware` has stored of it."""

    chatmem_stored: NotRequired[Annotated[list[str], PrivateStateAttr]]
    """The ids of the state's messages already in chatmem."""
    chatmem_system: NotRequired[Annotated[str | None, PrivateStateAttr]]
    """A digest of the system message last stored, so it is stored again only when it changes."""


def _digest(message: Message) -> str:
    return hashlib.sha256(json.dumps(message, sort_keys=True).encode()).hexdigest()


def _with_id(message: BaseMessage) -> BaseMessage:
    if message.id is None:
        message.id = str(uuid.uuid4())
    return message


class _Turn:
    """One model call's plan: what to commit before it, and the state update after it."""

    def __init__(self, request: ModelRequest[Any], pending: set[str]) -> None:
        state: dict[str, Any] = dict(request.state)
        self.stored: list[str] = list(state.get("chatmem_stored") or [])
        known = set(self.stored) | pending
        self.system_digest: str | None = state.get("chatmem_system")
        self.commit: list[Message] = []
        new: list[BaseMessage] = []
        if request.system_message is not None:
            system = to_chatmem(request.system_message)
            digest = _digest(system)
            if digest != self.system_digest:
                self.commit.append(system)
                self.system_digest = digest
        for message in request.messages:
            if is_facts(message):  # the server's, sent with every turn of the user
                continue
            if message.id is None or message.id not in known:
                new.append(_with_id(message))
        self.commit += [to_chatmem(m, i) for i, m in enumerate(new, len(self.commit))]
        self.new = [m.id for m in new if m.id is not None]
        self.stored += self.new

    def prompt(
        self,
        request: ModelRequest[Any],
        window: Window | None,
        facts: Sequence[Message] | None,
    ) -> ModelRequest[Any]:
        """``request`` with chatmem's window as its messages (and system message), and the
        user's facts from ``facts`` (an empty turn's prompt for the user; ``None``: no user)."""
        messages: list[Any] = window_messages(window, facts)
        system = request.system_message
        if messages and isinstance(messages[0], SystemMessage):
            system = messages.pop(0)  # the stored one: the summary is rendered into it
        return request.override(system_message=system, messages=messages)

    def answer(self, response: ModelResponse[Any]) -> tuple[list[Message], list[BaseMessage]]:
        result = [_with_id(m) for m in response.result]
        return [to_chatmem(m, i) for i, m in enumerate(result)], result

    def done(self, response: ModelResponse[Any], result: list[BaseMessage]) -> Any:
        self.stored += [m.id for m in result if m.id is not None]
        update = {"chatmem_stored": self.stored, "chatmem_system": self.system_digest}
        return ExtendedModelResponse(
            model_response=ModelResponse(
                result=result, structured_response=response.structured_response
            ),
            command=Command(update=update),
        )


class ChatmemMiddleware(AgentMiddleware[ChatmemState, Any]):
    """Keeps an agent's conversation in chatmem and sends the model chatmem's window.

    ``client`` defaults to a :class:`~chatmem.Client` from ``CHATMEM_URL`` / ``CHATMEM_TOKEN``;
    with ``async_client`` the async agent (``ainvoke``) uses it rather than a thread.
    ``conversation_id`` fixes the conversation; without it each run's ``thread_id`` names it
    (read with LangGraph's ``get_config``, which on Python 3.10 fails in async code: give
    ``conversation_id`` there).
    ``policy`` is sent with every request (``boundary`` defaults to ``"pair-safe"``).
    ``user`` names the conversation's user; without it each run's
    ``config["configurable"]["user_id"]`` does, when there is one (a str), and else the turns
    name no user and no facts are sent.
    """

    state_schema = ChatmemState

    def __init__(
        self,
        *,
        client: Client | None = None,
        async_client: AsyncClient | None = None,
        conversation_id: str | None = None,
        policy: Policy | None = None,
        user: str | None = None,
    ) -> None:
        super().__init__()
        self.client = client or Client()
        self.async_client = async_client
        self.conversation_id = conversation_id
        self.user = user
        self.policy: Policy = {"boundary": "pair-safe", **(policy or {})}
        # Ids committed by a model call that then failed, so its state update never came:
        # a retry must not commit them again.
        self._pending: dict[str, set[str]] = {}

    def _plan(self, request: ModelRequest[Any]) -> tuple[str, str | None, _Turn]:
        conversation = self._conversation()
        turn = _Turn(request, self._pending.get(conversation, set()))
        return conversation, self._user(), turn

    def _user(self) -> str | None:
        if self.user is not None:
            return self.user
        try:
            user = get_config().get("configurable", {}).get("user_id")
        except RuntimeError:
            return None
        return user if isinstance(user, str) else None

    def _committed(self, conversation: str, turn: _Turn) -> None:
        if turn.new:
            if len(self._pending) >= 1024 and conversation not in self._pending:
                self._pending.pop(next(iter(self._pending)))
            self._pending.setdefault(conversation, set()).update(turn.new)

    def _done(
        self,
        conversation: str,
        turn: _Turn,
        response: ModelResponse[Any],
        result: list[BaseMessage],
    ) -> Any:
        self._pending.pop(conversation, None)
        return turn.done(response, result)

    def _conversation(self) -> str:
        if self.conversation_id is not None:
            return self.conversation_id
        try:
            thread = get_config().get("configurable", {}).get("thread_id")
        except RuntimeError:
            thread = None
        if not isinstance(thread, str) or not thread:
            raise ValueError(
                "ChatmemMiddleware needs a conversation: run the agent with "
                "config={'configurable': {'thread_id': ...}}, or give conversation_id"
            )
        return thread

    def _window(
        self, conversation: str, user: str | None, commit: Sequence[Message]
    ) -> tuple[Window | None, list[Message] | None]:
        """Commits ``commit``; the window after it, and the user's facts prompt (``None``
        without a user)."""
        window: Window | None = None
        if commit:
            window = self.client.add_messages(conversation, commit, policy=self.policy, user=user)
        else:
            with contextlib.suppress(NotFoundError):
                window = self.client.get_messages(conversation, policy=self.policy)
        if user is None:
            return window, None
        return window, self.client.prompt(conversation, [], policy=self.policy, user=user).messages

    async def _awindow(
        self, conversation: str, user: str | None, commit: Sequence[Message]
    ) -> tuple[Window | None, list[Message] | None]:
        if self.async_client is None:
            return await asyncio.to_thread(self._window, conversation, user, commit)
        client = self.async_client
        window: Window | None = None
        if commit:
            window = await client.add_messages(conversation, commit, policy=self.policy, user=user)
        else:
            with contextlib.suppress(NotFoundError):
                window = await client.get_messages(conversation, policy=self.policy)
        if user is None:
            return window, None
        prompt = await client.prompt(conversation, [], policy=self.policy, user=user)
        return window, prompt.messages

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> Any:
        """Commits the turn so far, calls the model with the window, commits its answer."""
        conversation, user, turn = self._plan(request)
        window, facts = self._window(conversation, user, turn.commit)
        self._committed(conversation, turn)
        response = handler(turn.prompt(request, window, facts))
        answer, result = turn.answer(response)
        if answer:
            self.client.add_messages(conversation, answer, policy=self.policy, user=user)
        return self._done(conversation, turn, response, result)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> Any:
        """:meth:`wrap_model_call` for the async agent."""
        conversation, user, turn = self._plan(request)
        window, facts = await self._awindow(conversation, user, turn.commit)
        self._committed(conversation, turn)
        response = await handler(turn.prompt(request, window, facts))
        answer, result = turn.answer(response)
        if answer:
            if self.async_client is None:
                await asyncio.to_thread(
                    self.client.add_messages, conversation, answer, policy=self.policy, user=user
                )
            else:
                await self.async_client.add_messages(
                    conversation, answer, policy=self.policy, user=user
                )
        return self._done(conversation, turn, response, result)
