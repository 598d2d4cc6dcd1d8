"""TC, clearing old tool results: the transcript, and LangChain's side of the workload.

`transcript PATH` writes the tool-heavy agent transcript every arm replays (300 turns, each with
1-3 tool calls in 1-3 rounds, each result 1-8 KB of JSON: order records, product searches,
tracking histories), made from one seeded RNG, so a run and the next, and every side, get the
same bytes. chatmem's side (bench/chatmem-side, BENCH_TC_TRANSCRIPT) reads the same file.

`run PATH` replays it through LangChain: before every model call (one before each round of tool
calls, one for the final answer) the agent's whole message list goes through
`ContextEditingMiddleware(edits=[ClearToolUsesEdit(...)])`'s own `wrap_model_call`, and the
handler it calls trims what the middleware hands on with `trim_messages` to the budget: the
prompt the model would be sent. One JSON line per arm on stdout, with every call's figures.

Tokens are counted alike for every arm and side: chatmem's formula (3 per message, its role,
content, tool_call_id, each call's name and arguments; 3 per list) with tiktoken's cl100k.

Run with: bench/.venv/bin/python bench/python/clearing.py transcript|run PATH
"""

import hashlib
import json
import random
import sys
import time
import warnings

warnings.filterwarnings("ignore")

import tiktoken
from langchain.agents.middleware import ClearToolUsesEdit, ContextEditingMiddleware
from langchain.agents.middleware.types import ModelRequest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage, trim_messages

from peers import answer_text, user_text

SEED = 34
TURNS = 300
BUDGET = 20_000
# The clearing settings LangChain's arms share with chatmem's tuned clearing arms (keep them in
# step with bench/chatmem-side/src/tool_clearing.rs): the trigger, keep 3 (the default of both)
# and the tuned arm's keep 1, and the block of chatmem's tuned keep-3 arm for the third arm.
KEEP = 1
TRIGGER = 10_000
BLOCK = 6_000
SYSTEM = (
    "你是邻里仓的售后客服。You are the after-sales agent of a neighbourhood warehouse. "
    "Use the tools to look up orders, products and shipments before you answer; quote order "
    "numbers exactly and never promise a refund the order record does not allow."
)

# ---- the transcript ----

CITIES = ["上海市浦东新区", "杭州市西湖区", "Shenzhen Nanshan", "北京市朝阳区", "Chengdu Wuhou", "广州市天河区"]
STREETS = ["张杨路", "文三路", "Keyuan Road", "望京街", "Kehua North Road", "体育西路"]
PRODUCTS = [
    ("保温杯 500ml 不锈钢", "Insulated bottle 500 ml, stainless steel"),
    ("蓝牙耳机 降噪版", "Bluetooth earbuds, noise cancelling"),
    ("儿童雨靴 黄色", "Kids' rain boots, yellow"),
    ("空气炸锅 4.5L", "Air fryer 4.5 L"),
    ("有机燕麦片 1kg", "Organic rolled oats 1 kg"),
    ("机械键盘 红轴", "Mechanical keyboard, red switches"),
    ("羽绒被 200x230", "Down duvet 200x230"),
    ("猫砂 豆腐砂 6L", "Tofu cat litter 6 L"),
]
STATUSES = ["pending_payment", "paid", "awaiting_stock_transfer", "shipped", "in_transit", "delivered", "refund_requested"]
EVENTS = [
    ("订单已创建", "order created"),
    ("支付成功", "payment captured"),
    ("仓库拣货中", "picking at warehouse"),
    ("库存调拨中，等待入库", "waiting for stock transfer"),
    ("已出库，交付承运商", "handed to carrier"),
    ("到达转运中心", "arrived at sorting centre"),
    ("派送中", "out for delivery"),
    ("用户申请退款", "refund requested by customer"),
]
CARRIERS = ["SF Express", "中通快递", "JD Logistics", "圆通速递"]
QUERIES = ["保温杯", "noise cancelling earbuds", "儿童雨靴", "air fryer", "燕麦片", "keyboard", "羽绒被", "cat litter"]


class Gen:
    def __init__(self, seed):
        self.r = random.Random(seed)

    def pick(self, xs):
        return xs[self.r.randrange(len(xs))]

    def digits(self, n):
        return "".join(str(self.r.randrange(10)) for _ in range(n))

    def call_id(self):
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
        return "call_" + "".join(self.pick(alphabet) for _ in range(24))

    def stamp(self):
        return f"2026-{self.r.randint(9, 11):02d}-{self.r.randint(1, 28):02d}T{self.r.randint(0, 23):02d}:{self.r.randint(0, 59):02d}:{self.r.randint(0, 59):02d}+08:00"

    def item(self):
        zh, en = self.pick(PRODUCTS)
        price = self.r.randint(990, 89900) / 100
        return {
            "sku": "SKU-" + self.digits(8),
            "name": zh,
            "name_en": en,
            "quantity": self.r.randint(1, 4),
            "unit_price": price,
            "discount": round(price * self.r.choice([0, 0, 0.05, 0.1, 0.2]), 2),
            "warehouse": self.pick(["WH-SH-03", "WH-HZ-01", "WH-SZ-07", "WH-BJ-02"]),
            "batch": self.digits(6),
            "returnable_until": self.stamp()[:10],
        }

    def event(self):
        zh, en = self.pick(EVENTS)
        return {"at": self.stamp(), "event": en, "note": zh, "operator": self.pick(["system", "仓库", "carrier", "客服"]) + "-" + self.digits(3)}

    def fill(self, obj, key, make, target):
        """Appends `make()` to obj[key] until the JSON reaches `target` bytes (UTF-8)."""
        while len(dump(obj).encode()) < target:
            obj[key].append(make())
        while len(dump(obj).encode()) > 8192 and len(obj[key]) > 1:
            obj[key].pop()
        return dump(obj)

    def order(self, order_id, target):
        city = self.r.randrange(len(CITIES))
        rec = {
            "order_id": order_id,
            "status": self.pick(STATUSES),
            "created_at": self.stamp(),
            "customer": {"id": "CU" + self.digits(9), "name": self.pick(["王女士", "Li Wei", "陈先生", "Zhang Min"]), "phone": "138****" + self.digits(4), "vip_level": self.r.randint(0, 5)},
            "shipping_address": {"city": CITIES[city], "street": STREETS[city] + " " + str(self.r.randint(1, 999)) + "号", "postcode": self.digits(6)},
            "payment": {"method": self.pick(["alipay", "wechat_pay", "card"]), "paid_at": self.stamp(), "amount": self.r.randint(1000, 200000) / 100, "currency": "CNY"},
            "coupons": [{"code": "CP" + self.digits(6), "value": self.r.randint(5, 50), "expires": self.stamp()[:10]}],
            "items": [],
            "events": [],
        }
        # Items first, then events: a record as an order service returns it.
        self.fill(rec, "items", self.item, target * 0.55)
        return self.fill(rec, "events", self.event, target)

    def search(self, query, target):
        def hit():
            zh, en = self.pick(PRODUCTS)
            return {
                "sku": "SKU-" + self.digits(8),
                "title": f"{zh} | {en}",
                "price": self.r.randint(990, 89900) / 100,
                "stock": self.r.randint(0, 500),
                "rating": self.r.randint(30, 50) / 10,
                "reviews": self.r.randint(0, 20000),
                "seller": self.pick(["邻里仓自营", "Neighbourhood Goods", "好物优选", "Daily Supply Co."]),
                "delivery": self.pick(["次日达", "next day", "2-3 days", "预售 7 天"]),
            }

        return self.fill({"query": query, "page": 1, "total": self.r.randint(40, 4000), "results": []}, "results", hit, target)

    def tracking(self, number, target):
        return self.fill({"tracking_no": number, "carrier": self.pick(CARRIERS), "estimated_delivery": self.stamp()[:10], "events": []}, "events", self.event, target)

    def call(self, order_id, kind):
        """One tool call of `kind` (0-2) and its result: (call, result text)."""
        target = self.r.randint(1024, 8192)
        if kind == 0:
            name, args, result = "get_order", {"order_id": order_id}, self.order(order_id, target)
        elif kind == 1:
            q = self.pick(QUERIES)
            name, args, result = "search_products", {"query": q, "limit": 20}, self.search(q, target)
        else:
            number = "SF" + self.digits(12)
            name, args, result = "get_tracking", {"tracking_no": number}, self.tracking(number, target)
        # The arguments as LangChain's OpenAI projection writes them (json.dumps of the args).
        return {"id": self.call_id(), "name": name, "arguments": json.dumps(args)}, result


def dump(obj):
    return json.dumps(obj, ensure_ascii=False)


def make_transcript(seed=SEED, turns=TURNS):
    g = Gen(seed)
    out = []
    for i in range(turns):
        order_id = f"LC2026{10_00_0000 + i * 37:08d}"
        lead = f"订单{order_id}：" if i % 2 == 0 else f"Order {order_id}: "
        calls = g.r.randint(1, 3)
        # 1-3 calls in 1-3 rounds: each round's calls are made at once (parallel tool calls).
        rounds = g.r.randint(1, calls)
        sizes = [1] * rounds
        for _ in range(calls - rounds):
            sizes[g.r.randrange(rounds)] += 1
        # A turn calls each tool at most once.
        kinds = g.r.sample(range(3), calls)
        rs = []
        for n in sizes:
            made = [g.call(order_id, kinds.pop()) for _ in range(n)]
            rs.append({"calls": [c for c, _ in made], "results": [r for _, r in made]})
        out.append({"user": lead + user_text(i), "rounds": rs, "answer": lead + answer_text(i)})
    return {"seed": seed, "system": SYSTEM, "budget": BUDGET, "turns": out}


# ---- counting: chatmem's formula, cl100k ----

ENC = tiktoken.get_encoding("cl100k_base")
_counts = {}


def text_tokens(s):
    n = _counts.get(s)
    if n is None:
        n = _counts[s] = len(ENC.encode_ordinary(s))
    return n


ROLE = {"system": "system", "human": "user", "ai": "assistant", "tool": "tool"}


def sent(m):
    """A LangChain message as the model is sent it: role, content, tool_call_id, calls."""
    calls = tuple((c["id"], c["name"], json.dumps(c["args"])) for c in getattr(m, "tool_calls", None) or ())
    return (ROLE[m.type], m.content, getattr(m, "tool_call_id", None), calls)


def message_tokens(s):
    role, content, call_id, calls = s
    n = 3 + text_tokens(role) + text_tokens(content)
    if call_id is not None:
        n += text_tokens(call_id)
    for _, name, args in calls:
        n += text_tokens(name) + text_tokens(args)
    return n


def count(messages):
    """Tokens of a message list (the counter every LangChain component here is given)."""
    return 3 + sum(message_tokens(sent(m)) for m in messages)


# ---- replaying the transcript ----


def lc_messages(t):
    """The transcript as LangChain messages: (system, [turn's messages per call boundary])."""
    turns = []
    for turn in t["turns"]:
        steps = [[HumanMessage(turn["user"])]]
        for rnd in turn["rounds"]:
            calls = [{"id": c["id"], "name": c["name"], "args": json.loads(c["arguments"]), "type": "tool_call"} for c in rnd["calls"]]
            msgs = [AIMessage(content="", tool_calls=calls)]
            msgs += [ToolMessage(content=r, tool_call_id=c["id"], name=c["name"]) for c, r in zip(rnd["calls"], rnd["results"])]
            steps.append(msgs)
        steps.append([AIMessage(turn["answer"])])
        turns.append(steps)
    return SystemMessage(t["system"]), turns


def check(prompt):
    """(orphan tool messages, calls without their result) in a prompt of sent() tuples."""
    orphans = missing = 0
    for i, (role, _, call_id, calls) in enumerate(prompt):
        if role == "tool" and not any(call_id == c[0] for m in prompt[:i] for c in m[3]):
            orphans += 1
        for c in calls:
            if not any(m[0] == "tool" and m[2] == c[0] for m in prompt[i + 1 :]):
                missing += 1
    return orphans, missing


def replay(t, prompt_for):
    """Every call's figures for an arm: `prompt_for(system, history)` is the prompt."""
    system, turns = lc_messages(t)
    original = {}  # tool_call_id -> tokens of the result as stored
    history = []
    calls = {k: [] for k in ("turn", "tokens", "uncleared", "cached", "turns", "prefix", "cleared")}
    orphans = missing = over = 0
    breaks = {}
    previous = None
    for i, steps in enumerate(turns):
        for step in steps[:-1]:
            history += step
            for m in step:
                if isinstance(m, ToolMessage):
                    original[m.tool_call_id] = message_tokens(sent(m))
            prompt = [sent(m) for m in prompt_for(system, history)]
            tokens = 3 + sum(message_tokens(s) for s in prompt)
            cleared = [s for s in prompt if s[0] == "tool" and message_tokens(s) != original[s[2]]]
            uncleared = tokens + sum(original[s[2]] - message_tokens(s) for s in cleared)
            o, mi = check(prompt)
            orphans, missing, over = orphans + o, missing + mi, over + (tokens > t["budget"])
            calls["turn"].append(i)
            calls["tokens"].append(tokens)
            calls["uncleared"].append(uncleared)
            calls["turns"].append(sum(1 for s in prompt if s[0] == "user"))
            calls["prefix"].append(int(previous is not None and prompt[: len(previous)] == previous))
            common = 0
            for a, b in zip(previous or (), prompt):
                if a != b:
                    break
                common += 1
            calls["cached"].append(sum(message_tokens(s) for s in prompt[:common]))
            if previous is not None and not calls["prefix"][-1]:
                # Why it does not begin with the previous prompt, as chatmem's side says it.
                d = common
                newly = d < len(prompt) and d < len(previous) and prompt[d][0] == "tool" and prompt[d][2] == previous[d][2] and prompt[d] in cleared
                cause = "evicted" if previous[1:2] != prompt[1:2] else "cleared" if newly else "other"
                breaks[cause] = breaks.get(cause, 0) + 1
            calls["cleared"].append(len(cleared))
            previous = prompt
        history += steps[-1]
    return {"calls": calls, "breaks": breaks, "orphans": orphans, "missing_results": missing, "over_budget": over}


def trim(messages, budget):
    return trim_messages(messages, strategy="last", token_counter=count, max_tokens=budget, start_on="human", include_system=True)


def trim_only(budget):
    return lambda system, history: trim([system, *history], budget)


def edited_then_trimmed(middleware, budget):
    """The middleware's own wrap_model_call on the agent's messages (system apart, as
    create_agent hands them), then trim_messages on what it passes to the handler."""
    model = GenericFakeChatModel(messages=iter(()))

    def prompt(system, history):
        seen = []

        def handler(request):
            seen.append(trim([request.system_message, *request.messages], budget))
            return AIMessage("")

        middleware.wrap_model_call(ModelRequest(model=model, messages=list(history), system_message=system), handler)
        return seen[0]

    return prompt


def transcript_facts(path, t):
    raw = open(path, "rb").read()
    msgs = [SystemMessage(t["system"])]
    for steps in lc_messages(t)[1]:
        for step in steps:
            msgs += step
    return {"transcript_sha256": hashlib.sha256(raw).hexdigest(), "transcript_messages": len(msgs), "transcript_tokens": count(msgs)}


def run(path):
    t = json.load(open(path))
    budget = t["budget"]
    facts = transcript_facts(path, t)
    # Counted as token_count_method="model" would with an OpenAI model (system message
    # included), with the cl100k formula every arm is counted by.
    arms = [
        ("trim_messages 20,000", {"max_tokens": budget}, trim_only(budget)),
    ]
    # clear_at_least as given (LangChain's default 0: every result but the newest `keep`), and
    # chatmem's block.
    for keep, at_least in ((3, 0), (KEEP, 0), (3, BLOCK)):
        edit = ClearToolUsesEdit(trigger=TRIGGER, keep=keep, clear_at_least=at_least)
        system = SystemMessage(t["system"])
        mw = ContextEditingMiddleware(edits=[edit], token_counter=lambda ms, s=system: count([s, *ms]))
        settings = {"max_tokens": budget, "keep": keep, "trigger": TRIGGER, "clear_at_least": at_least, "placeholder": edit.placeholder}
        name = f"ClearToolUsesEdit + trim_messages 20,000 (keep {keep}, clear_at_least {at_least:,})"
        arms.append((name, settings, edited_then_trimmed(mw, budget)))
    for variant, settings, prompt_for in arms:
        started = time.perf_counter()
        r = replay(t, prompt_for)
        print(f"[python] TC {variant}: {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
        print(json.dumps({"workload": "TC", "system": "langchain (python)", "store": "memory", "variant": variant, "settings": settings, "budget": budget, **facts, **r}), flush=True)


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("transcript", "run"):
        sys.exit(__doc__)
    if sys.argv[1] == "transcript":
        with open(sys.argv[2], "w") as f:
            json.dump(make_transcript(), f, ensure_ascii=False)
    else:
        run(sys.argv[2])


if __name__ == "__main__":
    main()
