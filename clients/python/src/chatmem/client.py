"""Typed clients for every route of ``chatmem serve``: :class:`Client` (blocking) and
:class:`AsyncClient` (asyncio), both on httpx.

Both describe each call with the same :class:`_Call` and read every answer through the same
:func:`_read`, so they send the same requests and raise the same errors; they differ only in
how they send. Message text is never logged.
"""

from __future__ import annotations

import enum
import os
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, NamedTuple, TypedDict, TypeVar
from urllib.parse import quote

import httpx

from .errors import TransportError, error_from_response

__all__ = [
    "DEFAULT_TIMEOUT",
    "DEFAULT_URL",
    "AsyncClient",
    "Cleared",
    "Client",
    "ConversationPage",
    "Fact",
    "FactChange",
    "FactSource",
    "Facts",
    "HistoryPage",
    "Message",
    "Policy",
    "Prompt",
    "Recall",
    "RecallHit",
    "RecallOutcome",
    "Recalled",
    "ToolCall",
    "Window",
]

DEFAULT_URL = "http://127.0.0.1:8080"
"""The server's address when neither ``base_url`` nor ``CHATMEM_URL`` gives one."""

DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=5.0)
"""Every request's timeout unless the client is given another: 30 s, 5 s to connect."""

__version__ = "0.1.0"


class FunctionCall(TypedDict):
    """The function a tool call calls; ``arguments`` is JSON text."""

    name: str
    arguments: str


class ToolCall(TypedDict):
    """One tool call of an assistant message."""

    id: str
    type: Literal["function"]
    function: FunctionCall


class Message(TypedDict, total=False):
    """A message as the server reads and writes it: OpenAI's chat message plus chatmem's
    ``reasoning_content``, ``is_error`` and ``metadata``. ``content`` is text, or for a user
    message a list of parts (``{"type": "text", "text"}``, ``{"type": "image_url",
    "image_url": {"url"}}``, ...)."""

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None
    name: str
    tool_calls: list[ToolCall]
    tool_call_id: str
    reasoning_content: str
    is_error: bool
    metadata: dict[str, Any]


class ClearToolResults(TypedDict, total=False):
    """Old tool results cleared from the prompt, never from memory (``chatmem::ClearSpec``):
    each is sent as a placeholder naming the tool, the call and its size in tokens, except the
    ``keep`` most recent tool uses (1 to 1000, default 3). A field left out is the server's, or
    the default."""

    keep: int
    trigger_tokens: int
    clear_at_least_tokens: int
    exclude_tools: list[str]
    clear_inputs: bool


class Policy(TypedDict, total=False):
    """A request's own window policy (``chatmem::PolicySpec``); a field left out is the
    server's. Not stored: send it with every request that should use it."""

    max_messages: int
    max_tokens: int
    tokenizer: Literal["cl100k", "o200k", "heuristic"]
    evict_to: int
    boundary: Literal["user", "pair-safe"]
    clear_tool_results: ClearToolResults


@dataclass(frozen=True)
class Window:
    """What the message routes answer: the system message (if any) first, then the window
    the model sees, summary included as the server renders it."""

    conversation: str
    messages: list[Message]


@dataclass(frozen=True)
class Cleared:
    """What clearing old tool results took out of a prompt."""

    results: int
    """Tool results sent as placeholders."""
    inputs: int
    """Calls sent with their arguments cleared (``{}``)."""
    tokens_saved: int
    """The tokens the window would cost uncleared, less what it costs as sent."""


@dataclass(frozen=True)
class Recalled:
    """What recall put in a prompt: the messages that left the window and came back for the
    new user message, sent in one user message just before it."""

    seqs: list[int]
    """The recalled messages' sequence numbers, oldest first (empty: nothing recalled)."""
    tokens: int
    """The tokens of the message they are sent in (0 when nothing was recalled)."""


@dataclass(frozen=True)
class Prompt:
    """What ``POST …/prompt`` answers: the messages the next model call would be sent (the
    system message with the summary, the window, what recall found, the new messages), as the
    OpenAI door sends them; nothing was committed."""

    conversation: str
    messages: list[Message]
    tokens: int
    """The prompt's tokens, by the server's counter (or the policy's tokenizer)."""
    already_stored: int
    """Of the messages given, how many the conversation already holds (left out)."""
    cleared: Cleared
    recalled: Recalled
    """What recall put in the prompt (nothing when the server does not recall)."""


RecallOutcome = Literal["injected", "below_threshold", "past_k", "over_budget", "without_its_call"]
"""What became of a message recall found: recalled (``injected``), or cut by the relevance floor,
by ``k``, by the token budget, or as a tool result found without its call."""


@dataclass(frozen=True)
class RecallHit:
    """One message a recall search found, with what a turn asking the question would do with it."""

    seq: int
    """Its sequence number (as in the history)."""
    role: str
    content: str | None
    """Its text (every text part), ``None`` when it has none (an assistant's tool calls alone)."""
    message: Message
    """The message, as the other routes return messages."""
    score: float
    """Its BM25 score for the question."""
    relevance: float
    """Its score made comparable across questions, 0 to 1: what the relevance floor applies to."""
    lexical_rank: int | None
    """Its place among the hits by words, from 1; ``None`` when only its vector found it."""
    vector_rank: int | None
    """Its place among the hits by vector, from 1; ``None`` without embeddings."""
    similarity: float | None
    """Its vector's cosine similarity with the question's, -1 to 1 (what the similarity
    floor applies to); ``None`` as ``vector_rank``."""
    fused: float
    """Its reciprocal-rank-fusion score over both rankings: what orders the hits."""
    at: str | None
    """When it was written, RFC 3339 (``None`` when the store did not record it)."""
    outcome: RecallOutcome


@dataclass(frozen=True)
class Recall:
    """What ``GET …/recall`` answers: every message recall found for a question among those
    that left the window, best first, and the message a turn would be sent."""

    conversation: str
    enabled: bool
    """Whether the server's turns recall (``chatmem serve --recall K``)."""
    k: int
    """At most this many messages are recalled."""
    hits: list[RecallHit]
    injected: Message | None
    """The user message the recalled ones are sent in, just before the question (``None``:
    nothing would be recalled)."""
    injected_tokens: int

    @property
    def recalled(self) -> list[RecallHit]:
        """The hits a turn would send, oldest first."""
        return sorted((h for h in self.hits if h.outcome == "injected"), key=lambda h: h.seq)


@dataclass(frozen=True)
class HistoryPage:
    """One page of everything stored for a conversation, oldest first."""

    conversation: str
    messages: list[Message]
    next_cursor: str | None


@dataclass(frozen=True)
class ConversationPage:
    """One page of the tenant's conversation ids, ascending."""

    conversations: list[str]
    next_cursor: str | None


class FactSource(NamedTuple):
    """A message a fact was read from: ``(conversation, seq)``."""

    conversation: str
    """The conversation id, as the tenant knows it."""
    seq: int
    """The message's sequence number in it (as in the history)."""


@dataclass(frozen=True)
class Fact:
    """One thing known about a user, kept across their conversations (the server's ``Fact``)."""

    id: int
    """Unique among the user's facts, current and past; never given again."""
    text: str
    """What is known, one line."""
    key: str | None
    """What it is about (``home.city``): a newer fact with the same key supersedes it."""
    sources: list[FactSource]
    """The messages it was read from, oldest first (none for a fact added by hand)."""
    created: str | None
    """When it was made, RFC 3339."""
    updated: str | None
    """When it last changed in any way, RFC 3339."""
    confirmed: str | None
    """When it was last said to hold, RFC 3339: the least recently confirmed unpinned fact is
    the first to leave when the user's facts pass their bounds."""
    pinned: bool
    """A pinned fact never leaves by the bounds, and is written first."""


@dataclass(frozen=True)
class Facts:
    """What ``GET /v1/users/{user}/facts`` answers: the user's current facts, in the order a
    turn sends them (pinned first, then those with a key by key, then the others oldest first),
    and their version."""

    facts: list[Fact]
    version: int
    """0 for a user with no facts yet; every change bumps it."""


@dataclass(frozen=True)
class FactChange:
    """One entry of a fact's history: what happened to it, when and why. ``kind`` says which of
    the optional fields it has; a field the entry does not have is ``None``."""

    fact: int
    """The fact it happened to."""
    kind: str
    """``added``, ``confirmed``, ``superseded``, ``edited``, ``pinned``, ``unpinned`` or
    ``evicted`` (a newer server may send others)."""
    when: str | None
    """When, RFC 3339."""
    cause: dict[str, Any]
    """What caused it: ``{"by": "hand"}`` (a person, through the API) or ``{"by":
    "extraction", "conversation": id}`` (the facts model's reading of that conversation)."""
    text: str | None = None
    """The fact's text right after it (``added``, ``superseded``, ``edited``, ``evicted``)."""
    key: str | None = None
    """Its key right after it (``added``, ``edited``; ``confirmed`` when it took one)."""
    supersedes: int | None = None
    """``added``: the fact it replaced (same key)."""
    by: int | None = None
    """``superseded``: the fact that replaced it."""
    sources: list[FactSource] | None = None
    """``confirmed``: the messages that said it this time."""
    reason: str | None = None
    """``evicted``: the bound it left for, ``too_many_facts`` or ``too_many_tokens``."""


class _Unset(enum.Enum):
    """The default of an argument whose ``None`` means something (a key removed)."""

    UNSET = enum.auto()


_UNSET = _Unset.UNSET

T = TypeVar("T")


@dataclass(frozen=True)
class _Call(Generic[T]):
    """One request and how to read its answer: what both clients share."""

    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    params: Mapping[str, str | int | list[str]] | None = None
    body: Mapping[str, Any] | None = None
    headers: Mapping[str, bytes] | None = None


def _segment(id: str, what: str) -> str:
    """``id`` as one percent-encoded path segment (a ``/`` in it is sent as ``%2F``; the ids
    ``.`` and ``..`` as ``%2E``s, which no URL normalizer removes as it removes dot segments);
    ``what`` names it in the error for an id that is not a str."""
    if not isinstance(id, str):
        raise TypeError(f"a {what} is a str, not {type(id).__name__}")
    segment = quote(id, safe="")
    if segment in (".", ".."):
        segment = segment.replace(".", "%2E")
    return segment


def _conversation_path(conversation: str, suffix: str = "") -> str:
    """``/v1/conversations/{id}{suffix}``, the id one path segment (:func:`_segment`)."""
    return f"/v1/conversations/{_segment(conversation, 'conversation id')}{suffix}"


def _user_path(user: str, fact: int | None = None, suffix: str = "") -> str:
    """``/v1/users/{user}/facts[/{fact}]{suffix}``, the user id one path segment
    (:func:`_segment`, as a conversation id) and the fact id a whole number."""
    path = f"/v1/users/{_segment(user, 'user id')}/facts"
    if fact is None:
        return path + suffix
    # A bool is an int to Python, never a fact id; a str could be any path.
    if not isinstance(fact, int) or isinstance(fact, bool):
        raise TypeError(f"a fact id is an int, not {type(fact).__name__}")
    return f"{path}/{fact}{suffix}"


def _user_field(user: str | None) -> str | None:
    """A turn's ``user`` as the body sends it (checked by the server as the facts routes do)."""
    if user is not None and not isinstance(user, str):
        raise TypeError(f"a user id is a str, not {type(user).__name__}")
    return user


def _turn_body(
    messages: Sequence[Message], policy: Policy | None, user: str | None
) -> dict[str, Any]:
    """The body of ``POST …/messages`` and ``POST …/prompt``."""
    body: dict[str, Any] = {"messages": list(messages)}
    if policy:
        body["policy"] = dict(policy)
    if _user_field(user) is not None:
        body["user"] = user
    return body


def _header_id(id: str, header: str, what: str) -> bytes:
    """``id`` (a conversation or user id, ``what`` names it) as the value of ``header``: UTF-8,
    as the server reads it, so an id may be any text (``订单-LC202610060018``), as in a path.

    An id a header cannot carry as it is (a control character, or a space or tab at either
    end, which HTTP strips) raises :class:`ValueError` before any request; the server would
    refuse most of them as ids anyway, and the rest would arrive as another id."""
    if not isinstance(id, str):
        raise TypeError(f"a {what} is a str, not {type(id).__name__}")
    bad = next((i for i, c in enumerate(id) if c < " " or c == "\x7f"), None)
    if bad is not None:
        raise ValueError(
            f"{what}: a control character at position {bad}; "
            f"the {header} header cannot carry it (and no id has one)"
        )
    if id != id.strip(" \t"):
        raise ValueError(f"{what}: a space or tab at either end; the {header} header would lose it")
    return id.encode("utf-8")


def _params(**values: str | int | None) -> dict[str, str | int]:
    return {k: v for k, v in values.items() if v is not None}


def _policy_query(policy: Policy) -> dict[str, str | int | list[str]]:
    """``policy`` as the query of ``GET …/messages``: clearing's fields flat
    (``clear_tool_results.keep``), each excluded tool a repeated parameter."""
    params: dict[str, str | int | list[str]] = {}
    for key, value in policy.items():
        if isinstance(value, dict):
            for field, v in value.items():
                if v is not None:
                    params[f"{key}.{field}"] = _query_value(v)
        elif value is not None:
            params[key] = _query_value(value)
    return params


def _query_value(value: object) -> str | int | list[str]:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, str)):
        return value
    if isinstance(value, list):
        return [str(v) for v in value]
    return str(value)


def _window(r: httpx.Response) -> Window:
    body = r.json()
    return Window(conversation=body["conversation"], messages=body["messages"])


def _prompt(r: httpx.Response) -> Prompt:
    body = r.json()
    cleared = body["cleared"]
    # A server from before recall sends no `recalled`: it recalled nothing.
    recalled = body.get("recalled") or {"seqs": [], "tokens": 0}
    return Prompt(
        conversation=body["conversation"],
        messages=body["messages"],
        tokens=body["tokens"],
        already_stored=body["already_stored"],
        cleared=Cleared(cleared["results"], cleared["inputs"], cleared["tokens_saved"]),
        recalled=Recalled(list(recalled["seqs"]), recalled["tokens"]),
    )


def _recall(r: httpx.Response) -> Recall:
    body = r.json()
    hits = [
        RecallHit(
            seq=h["seq"],
            role=h["role"],
            content=h.get("content"),
            message=h["message"],
            score=h["score"],
            relevance=h["relevance"],
            lexical_rank=h.get("lexical_rank"),
            vector_rank=h.get("vector_rank"),
            similarity=h.get("similarity"),
            fused=h["fused"],
            at=h.get("at"),
            outcome=h["outcome"],
        )
        for h in body["hits"]
    ]
    return Recall(
        conversation=body["conversation"],
        enabled=body["enabled"],
        k=body["k"],
        hits=hits,
        injected=body.get("injected"),
        injected_tokens=body["injected_tokens"],
    )


def _history(r: httpx.Response) -> HistoryPage:
    body = r.json()
    return HistoryPage(body["conversation"], body["messages"], body.get("next_cursor"))


def _conversations(r: httpx.Response) -> ConversationPage:
    body = r.json()
    return ConversationPage(body["conversations"], body.get("next_cursor"))


def _sources(values: Any) -> list[FactSource]:
    # A history entry names a source of another tenant (which cannot be) as null; left out, as
    # the server leaves it out of a fact's own sources.
    return [
        FactSource(s["conversation"], s["seq"])
        for s in values or []
        if isinstance(s.get("conversation"), str)
    ]


def _fact_of(f: Mapping[str, Any]) -> Fact:
    return Fact(
        id=f["id"],
        text=f["text"],
        key=f.get("key"),
        sources=_sources(f.get("sources")),
        created=f.get("created"),
        updated=f.get("updated"),
        confirmed=f.get("confirmed"),
        pinned=bool(f.get("pinned", False)),
    )


def _change_of(c: Mapping[str, Any]) -> FactChange:
    sources = c.get("sources")
    return FactChange(
        fact=c["fact"],
        kind=c["kind"],
        when=c.get("when"),
        cause=dict(c.get("cause") or {}),
        text=c.get("text"),
        key=c.get("key"),
        supersedes=c.get("supersedes"),
        by=c.get("by"),
        sources=None if sources is None else _sources(sources),
        reason=c.get("reason"),
    )


def _fact(r: httpx.Response) -> Fact:
    return _fact_of(r.json())


def _facts(r: httpx.Response) -> Facts:
    body = r.json()
    return Facts([_fact_of(f) for f in body["facts"]], body["version"])


def _fact_history(r: httpx.Response) -> list[FactChange]:
    return [_change_of(c) for c in r.json()["history"]]


def _json(r: httpx.Response) -> dict[str, Any]:
    body: dict[str, Any] = r.json()
    return body


def _text(r: httpx.Response) -> str:
    return r.text


def _nothing(r: httpx.Response) -> None:
    return None


class _Routes:
    """Every route as a :class:`_Call`; the clients send them."""

    @staticmethod
    def health() -> _Call[dict[str, Any]]:
        return _Call("GET", "/healthz", _json)

    @staticmethod
    def get_messages(conversation: str, policy: Policy | None) -> _Call[Window]:
        params = _policy_query(policy) if policy else {}
        return _Call("GET", _conversation_path(conversation, "/messages"), _window, params)

    @staticmethod
    def add_messages(
        conversation: str, messages: Sequence[Message], policy: Policy | None, user: str | None
    ) -> _Call[Window]:
        if not messages:
            raise ValueError("messages is empty: a commit adds at least one message")
        body = _turn_body(messages, policy, user)
        return _Call("POST", _conversation_path(conversation, "/messages"), _window, body=body)

    @staticmethod
    def prompt(
        conversation: str, messages: Sequence[Message], policy: Policy | None, user: str | None
    ) -> _Call[Prompt]:
        body = _turn_body(messages, policy, user)
        return _Call("POST", _conversation_path(conversation, "/prompt"), _prompt, body=body)

    @staticmethod
    def recall(conversation: str, q: str, k: int | None) -> _Call[Recall]:
        if not isinstance(q, str):
            raise TypeError(f"a recall question is a str, not {type(q).__name__}")
        if not q:
            raise ValueError("q is empty: give the question to recall for")
        params = _params(q=q, k=k)
        return _Call("GET", _conversation_path(conversation, "/recall"), _recall, params)

    @staticmethod
    def history(conversation: str, limit: int | None, cursor: str | None) -> _Call[HistoryPage]:
        params = _params(limit=limit, cursor=cursor)
        return _Call("GET", _conversation_path(conversation, "/history"), _history, params)

    @staticmethod
    def list_conversations(limit: int | None, cursor: str | None) -> _Call[ConversationPage]:
        return _Call(
            "GET", "/v1/conversations", _conversations, _params(limit=limit, cursor=cursor)
        )

    @staticmethod
    def delete_conversation(conversation: str) -> _Call[None]:
        return _Call("DELETE", _conversation_path(conversation), _nothing)

    @staticmethod
    def chat_completion(
        conversation: str, request: Mapping[str, Any], user: str | None
    ) -> _Call[dict[str, Any]]:
        if request.get("stream"):
            raise ValueError("stream: not supported here; use an OpenAI client for streaming")
        headers = {
            "X-Chatmem-Conversation": _header_id(
                conversation, "X-Chatmem-Conversation", "conversation id"
            )
        }
        if user is not None:
            headers["X-Chatmem-User"] = _header_id(user, "X-Chatmem-User", "user id")
        return _Call("POST", "/v1/chat/completions", _json, body=request, headers=headers)

    @staticmethod
    def list_facts(user: str) -> _Call[Facts]:
        return _Call("GET", _user_path(user), _facts)

    @staticmethod
    def add_fact(user: str, text: str, key: str | None) -> _Call[Fact]:
        if not isinstance(text, str):
            raise TypeError(f"a fact's text is a str, not {type(text).__name__}")
        body: dict[str, Any] = {"text": text}
        if key is not None:
            body["key"] = key
        return _Call("POST", _user_path(user), _fact, body=body)

    @staticmethod
    def edit_fact(
        user: str, fact: int, text: str | None, key: str | _Unset | None, pinned: bool | None
    ) -> _Call[Fact]:
        body: dict[str, Any] = {}
        if text is not None:
            body["text"] = text
        if key is not _UNSET:
            body["key"] = key  # None: the key removed
        if pinned is not None:
            body["pinned"] = pinned
        if not body:
            raise ValueError("give text, key or pinned: the edit changes nothing")
        return _Call("PATCH", _user_path(user, fact), _fact, body=body)

    @staticmethod
    def delete_fact(user: str, fact: int) -> _Call[None]:
        return _Call("DELETE", _user_path(user, fact), _nothing)

    @staticmethod
    def fact_history(user: str, fact: int) -> _Call[list[FactChange]]:
        return _Call("GET", _user_path(user, fact, "/history"), _fact_history)

    @staticmethod
    def forget_user(user: str) -> _Call[None]:
        return _Call("DELETE", _user_path(user), _nothing)

    @staticmethod
    def models() -> _Call[dict[str, Any]]:
        return _Call("GET", "/v1/models", _json)

    @staticmethod
    def metrics() -> _Call[str]:
        return _Call("GET", "/metrics", _text)

    @staticmethod
    def openapi() -> _Call[dict[str, Any]]:
        return _Call("GET", "/openapi.json", _json)


def _request(call: _Call[T], base_url: str, headers: dict[str, str]) -> dict[str, Any]:
    """The arguments of httpx's ``request`` for ``call``. A request is sent once: a POST that
    failed in transit may have been committed, so resending it could store a turn twice."""
    return {
        "method": call.method,
        "url": base_url + call.path,
        "params": call.params,
        "json": call.body,
        "headers": {**headers, **(call.headers or {})},
    }


def _transport_error(call: _Call[T], base_url: str, e: httpx.TransportError) -> TransportError:
    """No answer: named by method, server and the error's kind (never the path, which holds ids)."""
    return TransportError(f"{call.method} {base_url}: {type(e).__name__}")


def _read(call: _Call[T], r: httpx.Response) -> T:
    """The answer of ``call``, or the server's error as an :class:`~chatmem.APIError`."""
    if r.is_success:
        return call.parse(r)
    try:
        body = r.json()
    except ValueError:
        body = None
    raise error_from_response(r.status_code, body, r.headers.get("x-request-id"))


def _settings(base_url: str | None, token: str | None) -> tuple[str, dict[str, str]]:
    """The base URL and headers from the arguments, else ``CHATMEM_URL`` / ``CHATMEM_TOKEN``.

    A token with a character that is not printable ASCII raises :class:`ValueError` (an HTTP
    header cannot carry it, and no server token has one); the message never shows the token.
    """
    url = base_url or os.environ.get("CHATMEM_URL") or DEFAULT_URL
    bearer = token if token is not None else os.environ.get("CHATMEM_TOKEN")
    headers = {"User-Agent": f"chatmem-python/{__version__}", "Accept": "application/json"}
    if bearer:
        bad = next((i for i, c in enumerate(bearer) if not "!" <= c <= "~"), None)
        if bad is not None:
            source = "the token argument" if token is not None else "CHATMEM_TOKEN"
            raise ValueError(
                f"{source} has a character that is not printable ASCII at position {bad}: "
                "a bearer token is sent in an HTTP header, which carries only those"
            )
        headers["Authorization"] = f"Bearer {bearer}"
    return url.rstrip("/"), headers


class Client:
    """A blocking client of ``chatmem serve``.

    ``base_url`` defaults to ``CHATMEM_URL`` (else ``http://127.0.0.1:8080``) and ``token``
    (the bearer token of a server run with ``--auth``) to ``CHATMEM_TOKEN``. Every request has
    ``timeout`` (default :data:`DEFAULT_TIMEOUT`). Use it as a context manager, or call
    :meth:`close`.
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        token: str | None = None,
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
        http_client: httpx.Client | None = None,
    ) -> None:
        url, headers = _settings(base_url, token)
        self.base_url = url
        self._http = http_client or httpx.Client(timeout=timeout)
        self._headers = headers

    def _send(self, call: _Call[T]) -> T:
        try:
            r = self._http.request(**_request(call, self.base_url, self._headers))
        except httpx.TransportError as e:
            raise _transport_error(call, self.base_url, e) from e
        return _read(call, r)

    def health(self) -> dict[str, Any]:
        """``GET /healthz``: ``{"status": "ok"}`` while the store answers."""
        return self._send(_Routes.health())

    def get_messages(self, conversation: str, *, policy: Policy | None = None) -> Window:
        """``GET /v1/conversations/{id}/messages``: the window the model sees (404 if none)."""
        return self._send(_Routes.get_messages(conversation, policy))

    def add_messages(
        self,
        conversation: str,
        messages: Sequence[Message],
        *,
        policy: Policy | None = None,
        user: str | None = None,
    ) -> Window:
        """``POST /v1/conversations/{id}/messages``: one atomic commit; the window after it.
        ``user`` names the conversation's user: the turn is theirs (with a facts model on the
        server, their messages are read for facts)."""
        return self._send(_Routes.add_messages(conversation, messages, policy, user))

    def prompt(
        self,
        conversation: str,
        messages: Sequence[Message],
        *,
        policy: Policy | None = None,
        user: str | None = None,
    ) -> Prompt:
        """``POST /v1/conversations/{id}/prompt``: a dry run, committing nothing. The messages
        the next model call would be sent if ``messages`` were said now (empty: the prompt as
        it stands), as the OpenAI door sends them, with their tokens and what clearing took
        out. A conversation that does not exist yet is no error: its prompt is ``messages``.
        With ``user`` (and ``chatmem serve --facts``) the prompt has that user's facts."""
        return self._send(_Routes.prompt(conversation, messages, policy, user))

    def recall(self, conversation: str, q: str, k: int | None = None) -> Recall:
        """``GET /v1/conversations/{id}/recall``: what recall finds for the question ``q``
        among the messages that left the window, best first, each with what a turn asking it
        would do (``injected``, or why not), and the message it would be sent. At most ``k``
        recalled (1 to 100; default: the server's ``--recall K``, else 5). Reads only; 404 for
        a conversation that does not exist."""
        return self._send(_Routes.recall(conversation, q, k))

    def history(
        self, conversation: str, *, limit: int | None = None, cursor: str | None = None
    ) -> HistoryPage:
        """``GET /v1/conversations/{id}/history``: one page of everything stored."""
        return self._send(_Routes.history(conversation, limit, cursor))

    def iter_history(self, conversation: str, *, limit: int | None = None) -> Iterator[Message]:
        """Every stored message of ``conversation``, reading page after page."""
        cursor: str | None = None
        while True:
            page = self.history(conversation, limit=limit, cursor=cursor)
            yield from page.messages
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def list_conversations(
        self, *, limit: int | None = None, cursor: str | None = None
    ) -> ConversationPage:
        """``GET /v1/conversations``: one page of the tenant's conversation ids."""
        return self._send(_Routes.list_conversations(limit, cursor))

    def iter_conversations(self, *, limit: int | None = None) -> Iterator[str]:
        """Every conversation id of the tenant, reading page after page."""
        cursor: str | None = None
        while True:
            page = self.list_conversations(limit=limit, cursor=cursor)
            yield from page.conversations
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def delete_conversation(self, conversation: str) -> None:
        """``DELETE /v1/conversations/{id}``: window, history and summary (404 if none)."""
        self._send(_Routes.delete_conversation(conversation))

    def chat_completion(
        self, conversation: str, request: Mapping[str, Any], *, user: str | None = None
    ) -> dict[str, Any]:
        """``POST /v1/chat/completions`` with memory (not streamed): ``request`` is OpenAI's
        chat-completion request; the answer is the upstream's, as it came. ``user`` is sent
        as ``X-Chatmem-User``: with ``chatmem serve --facts`` the model is sent that user's
        facts. Both ids go in headers, as UTF-8: one a header cannot carry (a control
        character, a space at either end) raises :class:`ValueError` before any request."""
        return self._send(_Routes.chat_completion(conversation, request, user))

    def list_facts(self, user: str) -> Facts:
        """``GET /v1/users/{user}/facts``: the user's current facts, in the order a turn sends
        them, and their version (none, version 0, for a user never seen)."""
        return self._send(_Routes.list_facts(user))

    def add_fact(self, user: str, text: str, *, key: str | None = None) -> Fact:
        """``POST /v1/users/{user}/facts``: adds a fact by hand; the fact the text is now in. A
        ``key`` supersedes the current fact with it (kept in its history); a text the same as a
        current fact's confirms that fact. A text that cannot be a fact's raises
        :class:`~chatmem.BadRequestError` naming ``text`` (``key`` for a bad key); a fact the
        pinned facts leave no room for :class:`~chatmem.ConflictError` (``fact_refused``)."""
        return self._send(_Routes.add_fact(user, text, key))

    def edit_fact(
        self,
        user: str,
        fact: int,
        *,
        text: str | None = None,
        key: str | _Unset | None = _UNSET,
        pinned: bool | None = None,
    ) -> Fact:
        """``PATCH /v1/users/{user}/facts/{fact}``: changes the fact's text or key (``key=None``
        removes it; left out, it stays), then pins or unpins it; the fact as it is now. The
        edit and the pin are committed one after the other: when the pin is refused
        (:class:`~chatmem.ConflictError`, ``fact_refused``: past the bounds), the edit stays.
        An unknown fact is :class:`~chatmem.NotFoundError`; giving nothing to change raises
        :class:`ValueError` before any request."""
        return self._send(_Routes.edit_fact(user, fact, text, key, pinned))

    def delete_fact(self, user: str, fact: int) -> None:
        """``DELETE /v1/users/{user}/facts/{fact}``: deletes the fact with its history, and the
        facts it superseded with theirs (:class:`~chatmem.NotFoundError` if none)."""
        self._send(_Routes.delete_fact(user, fact))

    def fact_history(self, user: str, fact: int) -> list[FactChange]:
        """``GET /v1/users/{user}/facts/{fact}/history``: what happened to the fact, oldest
        first, current or past (:class:`~chatmem.NotFoundError` once it is deleted)."""
        return self._send(_Routes.fact_history(user, fact))

    def forget_user(self, user: str) -> None:
        """``DELETE /v1/users/{user}/facts``: forgets every fact of the user and every history
        entry (also when nothing was kept); the user's conversations stay."""
        self._send(_Routes.forget_user(user))

    def models(self) -> dict[str, Any]:
        """``GET /v1/models``: the upstream's model list, as it came."""
        return self._send(_Routes.models())

    def metrics(self) -> str:
        """``GET /metrics``: the Prometheus text."""
        return self._send(_Routes.metrics())

    def openapi(self) -> dict[str, Any]:
        """``GET /openapi.json``: the API as OpenAPI 3.1."""
        return self._send(_Routes.openapi())

    def close(self) -> None:
        """Closes the connection pool."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncClient:
    """The asyncio twin of :class:`Client`: the same methods, awaited, the same settings."""

    def __init__(
        self,
        base_url: str | None = None,
        *,
        token: str | None = None,
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        url, headers = _settings(base_url, token)
        self.base_url = url
        self._http = http_client or httpx.AsyncClient(timeout=timeout)
        self._headers = headers

    async def _send(self, call: _Call[T]) -> T:
        try:
            r = await self._http.request(**_request(call, self.base_url, self._headers))
        except httpx.TransportError as e:
            raise _transport_error(call, self.base_url, e) from e
        return _read(call, r)

    async def health(self) -> dict[str, Any]:
        """``GET /healthz``."""
        return await self._send(_Routes.health())

    async def get_messages(self, conversation: str, *, policy: Policy | None = None) -> Window:
        """``GET /v1/conversations/{id}/messages``: the window the model sees (404 if none)."""
        return await self._send(_Routes.get_messages(conversation, policy))

    async def add_messages(
        self,
        conversation: str,
        messages: Sequence[Message],
        *,
        policy: Policy | None = None,
        user: str | None = None,
    ) -> Window:
        """``POST /v1/conversations/{id}/messages``: one atomic commit; the window after it
        (``user``: as :meth:`Client.add_messages`)."""
        return await self._send(_Routes.add_messages(conversation, messages, policy, user))

    async def prompt(
        self,
        conversation: str,
        messages: Sequence[Message],
        *,
        policy: Policy | None = None,
        user: str | None = None,
    ) -> Prompt:
        """``POST /v1/conversations/{id}/prompt``: a dry run, committing nothing. The messages
        the next model call would be sent if ``messages`` were said now (empty: the prompt as
        it stands), as the OpenAI door sends them, with their tokens and what clearing took
        out. A conversation that does not exist yet is no error: its prompt is ``messages``.
        With ``user`` (and ``chatmem serve --facts``) the prompt has that user's facts."""
        return await self._send(_Routes.prompt(conversation, messages, policy, user))

    async def recall(self, conversation: str, q: str, k: int | None = None) -> Recall:
        """``GET /v1/conversations/{id}/recall``: what recall finds for the question ``q``
        among the messages that left the window, best first, each with what a turn asking it
        would do (``injected``, or why not), and the message it would be sent. At most ``k``
        recalled (1 to 100; default: the server's ``--recall K``, else 5). Reads only; 404 for
        a conversation that does not exist."""
        return await self._send(_Routes.recall(conversation, q, k))

    async def history(
        self, conversation: str, *, limit: int | None = None, cursor: str | None = None
    ) -> HistoryPage:
        """``GET /v1/conversations/{id}/history``: one page of everything stored."""
        return await self._send(_Routes.history(conversation, limit, cursor))

    async def iter_history(
        self, conversation: str, *, limit: int | None = None
    ) -> AsyncIterator[Message]:
        """Every stored message of ``conversation``, reading page after page."""
        cursor: str | None = None
        while True:
            page = await self.history(conversation, limit=limit, cursor=cursor)
            for m in page.messages:
                yield m
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def list_conversations(
        self, *, limit: int | None = None, cursor: str | None = None
    ) -> ConversationPage:
        """``GET /v1/conversations``: one page of the tenant's conversation ids."""
        return await self._send(_Routes.list_conversations(limit, cursor))

    async def iter_conversations(self, *, limit: int | None = None) -> AsyncIterator[str]:
        """Every conversation id of the tenant, reading page after page."""
        cursor: str | None = None
        while True:
            page = await self.list_conversations(limit=limit, cursor=cursor)
            for c in page.conversations:
                yield c
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def delete_conversation(self, conversation: str) -> None:
        """``DELETE /v1/conversations/{id}`` (404 if none)."""
        await self._send(_Routes.delete_conversation(conversation))

    async def chat_completion(
        self, conversation: str, request: Mapping[str, Any], *, user: str | None = None
    ) -> dict[str, Any]:
        """``POST /v1/chat/completions`` with memory (not streamed; ``user`` as
        :meth:`Client.chat_completion` sends it)."""
        return await self._send(_Routes.chat_completion(conversation, request, user))

    async def list_facts(self, user: str) -> Facts:
        """``GET /v1/users/{user}/facts`` (:meth:`Client.list_facts`)."""
        return await self._send(_Routes.list_facts(user))

    async def add_fact(self, user: str, text: str, *, key: str | None = None) -> Fact:
        """``POST /v1/users/{user}/facts`` (:meth:`Client.add_fact`)."""
        return await self._send(_Routes.add_fact(user, text, key))

    async def edit_fact(
        self,
        user: str,
        fact: int,
        *,
        text: str | None = None,
        key: str | _Unset | None = _UNSET,
        pinned: bool | None = None,
    ) -> Fact:
        """``PATCH /v1/users/{user}/facts/{fact}`` (:meth:`Client.edit_fact`)."""
        return await self._send(_Routes.edit_fact(user, fact, text, key, pinned))

    async def delete_fact(self, user: str, fact: int) -> None:
        """``DELETE /v1/users/{user}/facts/{fact}`` (:meth:`Client.delete_fact`)."""
        await self._send(_Routes.delete_fact(user, fact))

    async def fact_history(self, user: str, fact: int) -> list[FactChange]:
        """``GET /v1/users/{user}/facts/{fact}/history`` (:meth:`Client.fact_history`)."""
        return await self._send(_Routes.fact_history(user, fact))

    async def forget_user(self, user: str) -> None:
        """``DELETE /v1/users/{user}/facts`` (:meth:`Client.forget_user`)."""
        await self._send(_Routes.forget_user(user))

    async def models(self) -> dict[str, Any]:
        """``GET /v1/models``."""
        return await self._send(_Routes.models())

    async def metrics(self) -> str:
        """``GET /metrics``."""
        return await self._send(_Routes.metrics())

    async def openapi(self) -> dict[str, Any]:
        """``GET /openapi.json``."""
        return await self._send(_Routes.openapi())

    async def aclose(self) -> None:
        """Closes the connection pool."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
