"""ChatmemMemory under LlamaIndex's current agents and chat engines, against a real
``chatmem serve`` and a scripted loopback model (tests/llama_index_support.py): the second
turn, run by a new agent with a new memory object, still finds the order number, and a write
the server refuses reaches the caller."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from llama_index.core.agent.workflow import AgentOutput, AgentWorkflow, FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.chat_engine import SimpleChatEngine

import chatmem
from chatmem import AsyncClient, Client
from chatmem.llama_index import ChatmemMemory

from .conftest import Server
from .llama_index_support import Model, llm, scripted_model

ORDER = "LC202610060018"

# the workflow package lists an agent's steps with inspect.getmembers, which touches pydantic's
# deprecated attributes: LlamaIndex's warnings, not these tests'
pytestmark = [
    pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince20"),
    pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince211"),
]


@pytest.fixture(scope="module")
def model() -> Iterator[Model]:
    with scripted_model() as m:
        yield m


class Desk:
    """The after-sale tools; records every call."""

    def __init__(self, status_size: int = 0) -> None:
        self.status_calls: list[str] = []
        self.refunds: list[str] = []
        self.status_size = status_size

    def order_status(self, order_id: str) -> str:
        """The shipping status of order ``order_id``."""
        self.status_calls.append(order_id)
        return f"订单 {order_id} 未发货" + "。" * self.status_size

    def refund(self, order_id: str) -> str:
        """Refunds order ``order_id``."""
        self.refunds.append(order_id)
        return f"订单 {order_id} 已退款"

    def agent(self, model: Model, *, streaming: bool = True) -> FunctionAgent:
        return FunctionAgent(
            tools=[self.order_status, self.refund],
            llm=llm(model),
            system_prompt="你是售后客服。",
            streaming=streaming,
        )


def _memory(server: Server, conversation: str, aclient: AsyncClient | None) -> ChatmemMemory:
    return ChatmemMemory(conversation, server.client(), async_client=aclient)


@pytest.mark.anyio
@pytest.mark.parametrize(("use_async", "streaming"), [(True, True), (False, False)])
async def test_a_new_agent_on_the_same_conversation_finds_the_order(
    server: Server,
    aclient: AsyncClient,
    model: Model,
    conversation: str,
    use_async: bool,
    streaming: bool,
) -> None:
    desk = Desk()
    a = aclient if use_async else None
    first: AgentOutput = await desk.agent(model, streaming=streaming).run(
        user_msg=f"我的订单 {ORDER} 还没发货", memory=_memory(server, conversation, a)
    )
    assert desk.status_calls == [ORDER]
    assert ORDER in str(first.response.content)

    with server.client() as client:
        stored = list(client.iter_history(conversation))
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "assistant"]
    # the body is the OpenAI message the model saw; the agent's own objects ride in metadata
    assert stored[1]["tool_calls"][0]["function"] == {
        "name": "order_status",
        "arguments": f'{{"order_id": "{ORDER}"}}',
    }
    assert stored[2]["tool_call_id"] == stored[1]["tool_calls"][0]["id"]

    # a new agent and a new memory object, as the next request of a stateless service has
    second: AgentOutput = await desk.agent(model, streaming=streaming).run(
        user_msg="那个订单能退款吗？", memory=_memory(server, conversation, a)
    )
    assert desk.refunds == [ORDER]
    assert "已退款" in str(second.response.content)
    memory = _memory(server, conversation, a)
    history = await memory.aget_all()
    assert [m.role for m in history] == [
        MessageRole.USER,
        MessageRole.ASSISTANT,
        MessageRole.TOOL,
        MessageRole.ASSISTANT,
    ] * 2
    (call,) = [b for b in history[5].blocks if isinstance(b, ToolCallBlock)]
    assert (call.tool_name, call.tool_kwargs) == ("refund", f'{{"order_id": "{ORDER}"}}')
    assert await memory.aget() == history  # the window holds it all


@pytest.mark.anyio
async def test_without_the_history_the_model_asks_which_order(
    server: Server, aclient: AsyncClient, model: Model, conversation: str
) -> None:
    # the control of the test above: the script finds the order only in what it was sent
    desk = Desk()
    answer: AgentOutput = await desk.agent(model).run(
        user_msg="那个订单能退款吗？", memory=_memory(server, conversation, aclient)
    )
    assert desk.refunds == []
    assert str(answer.response.content) == "请问是哪个订单？"


@pytest.mark.anyio
async def test_agent_workflow_keeps_its_turns(
    server: Server, aclient: AsyncClient, model: Model, conversation: str
) -> None:
    desk = Desk()

    def workflow() -> AgentWorkflow:
        return AgentWorkflow(agents=[desk.agent(model)], root_agent="Agent")

    await workflow().run(
        user_msg=f"我的订单 {ORDER} 还没发货", memory=_memory(server, conversation, aclient)
    )
    await workflow().run(
        user_msg="那个订单能退款吗？", memory=_memory(server, conversation, aclient)
    )
    assert (desk.status_calls, desk.refunds) == ([ORDER], [ORDER])


def test_chat_engine_over_two_turns(server: Server, model: Model, conversation: str) -> None:
    def engine() -> SimpleChatEngine:  # a new engine and memory each turn
        memory = ChatmemMemory(conversation, server.client())
        return SimpleChatEngine.from_defaults(llm=llm(model), memory=memory)

    assert str(engine().chat(f"我的订单是 {ORDER}。")) == f"收到：我的订单是 {ORDER}。"
    assert str(engine().chat("那个订单能退款吗？")) == f"订单 {ORDER} 可以退款。"
    sent = model.received[-1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert engine().chat_history == [
        ChatMessage(role=MessageRole.USER, content=f"我的订单是 {ORDER}。"),
        ChatMessage(role=MessageRole.ASSISTANT, content=f"收到：我的订单是 {ORDER}。"),
        ChatMessage(role=MessageRole.USER, content="那个订单能退款吗？"),
        ChatMessage(role=MessageRole.ASSISTANT, content=f"订单 {ORDER} 可以退款。"),
    ]


@pytest.mark.anyio
async def test_async_chat_engine(
    server: Server, aclient: AsyncClient, model: Model, conversation: str
) -> None:
    for text in (f"我的订单是 {ORDER}。", "那个订单能退款吗？"):
        memory = ChatmemMemory(conversation, server.client(), async_client=aclient)
        engine = SimpleChatEngine.from_defaults(llm=llm(model), memory=memory)
        answer = await engine.achat(text)
    assert str(answer) == f"订单 {ORDER} 可以退款。"


# ---------------------------------------------------------------------------------------------
# a refused write reaches the caller


def _refused(client: Client) -> float:
    """``chatmem_writes_refused_total`` summed over its labels."""
    text = client.metrics()
    if "chatmem_writes_refused_total" not in text:
        pytest.skip("this chatmem binary has no chatmem_writes_refused_total")
    pattern = r"^chatmem_writes_refused_total\{.*\} (\S+)$"  # a label holds "{id}"
    return sum(float(v) for v in re.findall(pattern, text, re.M))


@pytest.mark.anyio
@pytest.mark.parametrize("use_async", [True, False])
async def test_an_agent_turn_the_server_refuses_raises(
    server: Server, aclient: AsyncClient, model: Model, conversation: str, use_async: bool
) -> None:
    desk = Desk()
    calls = len(model.received)
    memory = _memory(server, conversation, aclient if use_async else None)
    with pytest.raises(chatmem.RequestTooLargeError) as e:  # over the limit of one message
        await desk.agent(model).run(user_msg="退" * 100_000, memory=memory)
    assert e.value.code == "too_large"
    assert e.value.request_id
    assert len(model.received) == calls  # the turn stopped before the model was asked
    assert await memory.aget_all() == []


@pytest.mark.anyio
@pytest.mark.parametrize("use_async", [True, False])
async def test_a_2mb_agent_turn_raises(
    server: Server, aclient: AsyncClient, model: Model, conversation: str, use_async: bool
) -> None:
    # over the server's body limit: answered 413 before the body is read, and the server
    # reads the rest before it closes, so a client still sending gets the 413 too
    memory = _memory(server, conversation, aclient if use_async else None)
    with pytest.raises(chatmem.RequestTooLargeError):
        await Desk().agent(model).run(user_msg="退" * (2 << 20), memory=memory)
    assert await memory.aget_all() == []


def test_the_server_counts_refused_writes(server: Server, conversation: str) -> None:
    with server.client() as client:
        memory = ChatmemMemory(conversation, client)
        too_big = ChatMessage(role=MessageRole.USER, content="退" * 100_000)
        counts = []
        for _ in range(2):  # the counter shows once it has counted a refusal
            with pytest.raises(chatmem.RequestTooLargeError):
                memory.put(too_big)
            counts.append(_refused(client))
        assert counts[1] == counts[0] + 1


@pytest.mark.anyio
async def test_a_refused_end_of_turn_raises(
    server: Server, aclient: AsyncClient, model: Model, conversation: str
) -> None:
    # the tool's result is over the server's limit per message: the agent's commit at the end
    # of the turn (the call, the result, the answer) is refused, and the run raises
    desk = Desk(status_size=100_000)
    memory = _memory(server, conversation, aclient)
    with pytest.raises(chatmem.RequestTooLargeError):
        await desk.agent(model).run(user_msg=f"我的订单 {ORDER} 还没发货", memory=memory)
    assert desk.status_calls == [ORDER]
    assert [m.role for m in await memory.aget_all()] == [MessageRole.USER]


def test_a_chat_engine_turn_the_server_refuses_raises(
    server: Server, model: Model, conversation: str
) -> None:
    engine = SimpleChatEngine.from_defaults(
        llm=llm(model), memory=ChatmemMemory(conversation, server.client())
    )
    calls = len(model.received)
    with pytest.raises(chatmem.RequestTooLargeError):
        engine.chat("退" * (2 << 20))
    assert len(model.received) == calls  # the model was not asked
    assert engine.chat_history == []


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_streamed_answer_the_server_refuses_raises_from_the_stream(
    server: Server, model: Model, conversation: str
) -> None:
    # the question just fits the server's limit per message; the answer ("收到:" + question)
    # does not. A streaming chat engine writes the answer in a thread: the refusal reaches the
    # caller through response_gen.
    question = "x" * (256 * 1024 - 3)  # a plain text message: its body is all it stores
    engine = SimpleChatEngine.from_defaults(
        llm=llm(model), memory=ChatmemMemory(conversation, server.client())
    )
    stream = engine.stream_chat(question)
    with pytest.raises(chatmem.RequestTooLargeError):
        "".join(stream.response_gen)
    assert [m.role for m in engine.chat_history] == [MessageRole.USER]
