"""``ChatmemMiddleware`` in a real ``create_agent`` (LangChain 1.x) with ``ChatOpenAI`` against a
scripted chat-completions model on loopback and a real ``chatmem serve``: a new agent with no
checkpointer remembers the order through chatmem alone; prompts stay within the window policy
and never split a tool call from its results; a refused commit raises; a retried model call
stores nothing twice."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ModelRetryMiddleware
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import BaseTool, tool
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

import chatmem
from chatmem import AsyncClient, Policy
from chatmem.langchain import from_chatmem
from chatmem.langchain_agent import ChatmemMiddleware

from .conftest import Server
from .upstream_agent import FAIL, ScriptedModel, calls, says, scripted_model, text_of

ORDER = "LC202610060018"
ORDER_NUMBER = re.compile(r"LC\d{12}")
SYSTEM = "你是邻里仓的售后客服。"


def aftersale(request: dict[str, Any]) -> dict[str, Any]:
    """Looks an order up when the question names one; refunds only an order it can see."""
    messages = request["messages"]
    last = messages[-1]
    if last["role"] == "tool":
        return says(f"查到了：{text_of(last)}")
    question = text_of(last)
    if "退款" in question:
        seen = ORDER_NUMBER.findall(json.dumps(messages, ensure_ascii=False))
        return calls(("refund", {"order_id": seen[-1]})) if seen else says("请问是哪个订单？")
    named = ORDER_NUMBER.findall(question)
    return calls(("order_status", {"order_id": named[0]})) if named else says("您好！")


def _shop(ran: list[tuple[str, str]]) -> list[BaseTool]:
    @tool
    def order_status(order_id: str) -> str:
        """The shipping status of an order."""
        ran.append(("order_status", order_id))
        return f"{order_id}：已打包，待发货"

    @tool
    def refund(order_id: str) -> str:
        """Refunds an order."""
        ran.append(("refund", order_id))
        return f"{order_id}：退款已受理"

    return [order_status, refund]


def _model(model: ScriptedModel) -> ChatOpenAI:
    return ChatOpenAI(
        base_url=model.base_url, api_key=SecretStr("x"), model="gpt-4o-mini", max_retries=0
    )


def _agent(
    model: ScriptedModel, tools: list[BaseTool], middleware: list[AgentMiddleware[Any, Any]]
) -> Any:
    return create_agent(_model(model), tools, system_prompt=SYSTEM, middleware=middleware)


def _thread(conversation: str) -> Any:
    return {"configurable": {"thread_id": conversation}}


def _ask(text: str) -> dict[str, Any]:
    return {"messages": [HumanMessage(text)]}


def test_a_new_agent_on_the_thread_remembers_the_order(server: Server, conversation: str) -> None:
    ran: list[tuple[str, str]] = []
    with scripted_model(aftersale) as model, server.client() as client:
        first = _agent(model, _shop(ran), [ChatmemMiddleware(client=client)]).invoke(
            _ask(f"我的订单 {ORDER} 还没发货"), _thread(conversation)
        )
        assert ran == [("order_status", ORDER)]
        # A new agent and no checkpointer: only chatmem remembers turn 1.
        second = _agent(model, _shop(ran), [ChatmemMiddleware(client=client)]).invoke(
            _ask("那个订单能退款吗？"), _thread(conversation)
        )
        assert ran == [("order_status", ORDER), ("refund", ORDER)]
        assert second["messages"][-1].content == f"查到了：{ORDER}：退款已受理"
        assert len(second["messages"]) == 4  # the agent's own state: this turn only
        refund_prompt = model.prompts()[2]
        assert refund_prompt[0] == {"role": "system", "content": SYSTEM}
        assert refund_prompt[-1] == {"role": "user", "content": "那个订单能退款吗？"}
        # Every message was stored once, and reads back as the agents' own.
        stored = [from_chatmem(m) for m in client.iter_history(conversation)]
        assert stored == [SystemMessage(SYSTEM), *first["messages"], *second["messages"]]


def test_without_chatmem_the_new_agent_asks_which_order(conversation: str) -> None:
    """The control: the same two turns with no memory do not refund."""
    ran: list[tuple[str, str]] = []
    with scripted_model(aftersale) as model:
        _agent(model, _shop(ran), []).invoke(_ask(f"我的订单 {ORDER} 还没发货"))
        answer = _agent(model, _shop(ran), []).invoke(_ask("那个订单能退款吗？"))
    assert ran == [("order_status", ORDER)]
    assert answer["messages"][-1].content == "请问是哪个订单？"


def errands(request: dict[str, Any]) -> dict[str, Any]:
    """Four lookups a turn, whatever the model sees: one, two at once, one more, then an
    answer (each step read from the last tool result)."""
    messages = request["messages"]
    last = messages[-1]
    if last["role"] != "tool":
        return calls(("lookup", {"step": 1}))
    step = json.loads(text_of(last))["step"]
    if step == 1:
        return calls(("lookup", {"step": 2}), ("lookup", {"step": 3}))
    if step == 3:
        return calls(("lookup", {"step": 4}))
    return says("都办好了。")


@tool
def lookup(step: int) -> str:
    """One step of an errand."""
    return json.dumps({"step": step})


def _check_prompt(prompt: list[dict[str, Any]], bound: int) -> None:
    assert len(prompt) <= bound
    assert prompt[0] == {"role": "system", "content": SYSTEM}
    assert prompt[1]["role"] != "tool"
    called: set[str] = set()
    answered: set[str] = set()
    for m in prompt[1:]:
        if m["role"] == "tool":
            assert m["tool_call_id"] in called, f"a tool result without its call: {prompt}"
            answered.add(m["tool_call_id"])
        called |= {c["id"] for c in m.get("tool_calls", [])}
    assert called == answered, f"a tool call without its result: {prompt}"


@pytest.mark.parametrize("bound", [4, 5, 7])
def test_every_prompt_stays_within_the_window(
    server: Server, conversation: str, bound: int
) -> None:
    policy: Policy = {"max_messages": bound}
    with scripted_model(errands) as model, server.client() as client:
        agent = _agent(model, [lookup], [ChatmemMiddleware(client=client, policy=policy)])
        for turn in range(3):
            state = agent.invoke(_ask(f"第 {turn + 1} 件事"), _thread(conversation))
            assert len(state["messages"]) == 9  # the agent's list outgrows the window
        prompts = model.prompts()
        assert len(prompts) == 3 * 4
        for prompt in prompts:
            _check_prompt(prompt, bound)
        assert max(len(p) for p in prompts) == bound  # the bound was reached
        assert len(list(client.iter_history(conversation))) == 1 + 3 * 9


def test_a_refused_commit_fails_the_run(server: Server, conversation: str) -> None:
    with scripted_model(aftersale) as model, server.client() as client:
        agent = _agent(model, _shop([]), [ChatmemMiddleware(client=client)])
        with pytest.raises(chatmem.RequestTooLargeError):
            agent.invoke(_ask("我" * (700 * 1024)), _thread(conversation))
        assert model.received == []


def test_a_retried_model_call_stores_nothing_twice(server: Server, conversation: str) -> None:
    failures = iter([FAIL])

    def flaky(request: dict[str, Any]) -> dict[str, Any]:
        return next(failures, None) or aftersale(request)

    with scripted_model(flaky) as model, server.client() as client:
        retry = ModelRetryMiddleware(max_retries=1, initial_delay=0, jitter=False)
        agent = _agent(model, _shop([]), [retry, ChatmemMiddleware(client=client)])
        agent.invoke(_ask("你好"), _thread(conversation))
        assert len(model.received) == 2
        stored = [m["role"] for m in client.iter_history(conversation)]
        assert stored == ["system", "user", "assistant"]


def test_a_conversation_needs_a_thread_or_an_id(server: Server) -> None:
    with scripted_model(aftersale) as model, server.client() as client:
        agent = _agent(model, _shop([]), [ChatmemMiddleware(client=client)])
        with pytest.raises(ValueError, match="thread_id"):
            agent.invoke(_ask("你好"))
        fixed = ChatmemMiddleware(client=client, conversation_id="py-agent/fixed")
        _agent(model, _shop([]), [fixed]).invoke(_ask("你好"))
        assert [m["role"] for m in client.iter_history("py-agent/fixed")] == [
            "system",
            "user",
            "assistant",
        ]


@pytest.mark.anyio
async def test_the_async_agent_remembers_through_chatmem(server: Server, conversation: str) -> None:
    ran: list[tuple[str, str]] = []
    with scripted_model(aftersale) as model, server.client() as client:
        async with AsyncClient(server.url, token=server.token_a) as aclient:
            for question in (f"我的订单 {ORDER} 还没发货", "那个订单能退款吗？"):
                middleware = ChatmemMiddleware(client=client, async_client=aclient)
                await _agent(model, _shop(ran), [middleware]).ainvoke(
                    _ask(question), _thread(conversation)
                )
        assert ran == [("order_status", ORDER), ("refund", ORDER)]
        stored: list[BaseMessage] = [from_chatmem(m) for m in client.iter_history(conversation)]
        assert [m.type for m in stored] == ["system"] + ["human", "ai", "tool", "ai"] * 2
