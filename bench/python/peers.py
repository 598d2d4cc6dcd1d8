"""The Python peers' side of the benchmark: langchain-core (InMemoryChatMessageHistory +
trim_messages), langchain-community (SQLite and Redis histories), langchain-postgres and
llama-index-core (ChatMemoryBuffer), each configured as its docs show, on the workloads of
bench-chatmem. One JSON line per result on stdout; bench/run.sh runs it in bench/.venv.

Run with: bench/.venv/bin/python bench/python/peers.py [--quick]
"""

import json
import os
import statistics
import sys
import tempfile
import threading
import time
import warnings

warnings.filterwarnings("ignore")

import tiktoken
from langchain_core.chat_history import InMemoryChatMessageHistory
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, trim_messages
from langchain_core.messages.utils import count_tokens_approximately

QUICK = "--quick" in sys.argv
ONLY = [w.strip().upper() for w in os.environ.get("BENCH_ONLY", "").split(",") if w.strip()]
MEMORY_TURNS = 400 if QUICK else 2000
LONG_TURNS = 400 if QUICK else 2000
HISTORIES = [10, 100, 1000] if QUICK else [10, 100, 1000, 10000, 100000]
STORE_TURNS = 30 if QUICK else 200
STORE_CAP = 2.0 if QUICK else 8.0
W4_TURNS = 10 if QUICK else 50
MEMORY_CAP = 5.0 if QUICK else 60.0  # per in-memory case: the re-tokenizing peers would take hours
W4_OWN_TURNS = 5 if QUICK else 50
W1_MESSAGES, W2_TOKENS, W2L_TOKENS, W3_MESSAGES = 20, 4000, 100000, 20
SHARED_WORKERS, OWN_WORKERS = 16, 64
RUN = format(int(time.time() * 1000), "x")

# The same text as bench-common (Rust): keep the two in step.
ZH = "我的订单LC202610060018还没有发货，已经等了三天了，请帮我查一下物流状态，如果还不能发货的话我想申请退款，另外优惠券能不能一起退回来？"
EN = "My order LC202610060018 has not shipped yet and it has been three days. Could you check the logistics status, and if it still cannot ship I would like a refund; can the coupon be returned as well? "
ZH_A = "您好，已为您查询订单LC202610060018：仓库显示该订单因库存调拨暂未出库，预计明天下午发出。如果您不想等待，可以在订单页面点击申请退款，款项将在一到三个工作日内原路退回，优惠券会在退款完成后自动返还到您的账户，有效期不变。"
EN_A = "Hello, I have checked order LC202610060018 for you: the warehouse shows it is waiting for a stock transfer and has not left yet; it should ship tomorrow afternoon. If you would rather not wait, tap Request refund on the order page and the money returns to your original payment method within one to three working days. The coupon is returned to your account automatically once the refund completes, with its original expiry date. "


def cut(pattern, seed, n):
    # One slice of the pattern repeated: making the text is timed with each turn, for every
    # system alike, so it must cost next to nothing (a per-character loop was most of a turn).
    start = (seed * 7) % len(pattern)
    return (pattern * (n // len(pattern) + 2))[start : start + n]


def user_text(i, tag=""):
    return tag + (cut(ZH, i, 200) if i % 2 == 0 else cut(EN, i, 200))


def answer_text(i, tag=""):
    return tag + (cut(ZH_A, i, 600) if i % 2 == 0 else cut(EN_A, i, 600))


def tag(w, t, kind):
    return f"<w{w}t{t}{kind}>"


def runs(name):
    return not ONLY or name.upper() in ONLY


def emit(workload, system, store, **fields):
    print(json.dumps({"workload": workload, "system": system, "store": store, **fields}), flush=True)


def progress(msg):
    print(f"[python] {msg}", file=sys.stderr, flush=True)


def summary(samples, keep=False):
    s = sorted(samples)
    at = lambda q: s[round((len(s) - 1) * q)]
    out = {"turns": len(s), "median_us": at(0.5), "p90_us": at(0.9), "mean_us": statistics.fmean(s)}
    if keep:
        out["samples_us"] = [round(x, 1) for x in samples]
    return out


def measure(turn, warmup, n, cap=None):
    # Warm-up stops at half the cap too: the slowest peers need seconds per turn.
    started = time.perf_counter()
    first = warmup
    for i in range(warmup):
        turn(i)
        if cap is not None and time.perf_counter() - started > cap / 2:
            first = i + 1
            break
    samples = []
    for i in range(first, first + n):
        t = time.perf_counter()
        turn(i)
        samples.append((time.perf_counter() - t) * 1e6)
        if cap is not None and len(samples) >= 3 and time.perf_counter() - started > cap:
            break
    return samples


# ---- token counting: the langchain docs' tiktoken counter (OpenAI's per-message formula) ----
ENC = tiktoken.get_encoding("cl100k_base")


def tiktoken_counter(messages):
    num = 3
    for m in messages:
        num += 3 + len(ENC.encode(m.type)) + len(ENC.encode(m.content))
    return num


def lc_turn(history, trim):
    """langchain: read the history, trim it to the window the model gets, store the pair."""

    def turn(i, u=None, a=None):
        window = trim(history.messages)
        assert window is not None
        history.add_messages([HumanMessage(u or user_text(i)), AIMessage(a or answer_text(i))])

    return turn


def by_count(n):
    return lambda msgs: trim_messages(msgs, strategy="last", token_counter=len, max_tokens=n, start_on="human")


def by_tokens(budget, counter):
    return lambda msgs: trim_messages(msgs, strategy="last", token_counter=counter, max_tokens=budget, start_on="human")


def llama_turn(budget):
    from llama_index.core.base.llms.types import ChatMessage, MessageRole
    from llama_index.core.memory import ChatMemoryBuffer

    memory = ChatMemoryBuffer.from_defaults(token_limit=budget)

    def turn(i):
        assert memory.get() is not None
        memory.put(ChatMessage(role=MessageRole.USER, content=user_text(i)))
        memory.put(ChatMessage(role=MessageRole.ASSISTANT, content=answer_text(i)))

    return turn


def in_memory():
    if runs("W1"):
        s = measure(lc_turn(InMemoryChatMessageHistory(), by_count(W1_MESSAGES)), 100, MEMORY_TURNS, MEMORY_CAP)
        emit("W1", "langchain (python)", "memory", **summary(s))
        progress("W1 done")
    for workload, budget, turns, keep, warmup in [
        ("W2", W2_TOKENS, MEMORY_TURNS, False, 100),
        ("W2L", W2L_TOKENS, LONG_TURNS, True, 0),
    ]:
        if not runs(workload):
            continue
        cases = [
            ("langchain (python)", "cl100k (tiktoken counter from the docs)", lc_turn(InMemoryChatMessageHistory(), by_tokens(budget, tiktoken_counter))),
            ("langchain (python)", "count_tokens_approximately", lc_turn(InMemoryChatMessageHistory(), by_tokens(budget, count_tokens_approximately))),
            ("llama-index", "cl100k (default tokenizer)", llama_turn(budget)),
        ]
        for name, variant, turn in cases:
            s = measure(turn, warmup, turns, MEMORY_CAP)
            emit(workload, name, "memory", variant=variant, **summary(s, keep))
            progress(f"{workload} {name} {variant} done")


# ---- stores ----


class Store:
    def __init__(self, system, store, make, seed):
        self.system, self.store, self.make, self.seed = system, store, make, seed


def sqlite_store(path):
    from langchain_community.chat_message_histories import SQLChatMessageHistory
    from sqlalchemy import create_engine

    engine = create_engine(f"sqlite:///{path}")

    def make(conv):
        return SQLChatMessageHistory(session_id=conv, connection=engine)

    # A history creates its table when made, with a check-then-create that races: 16 W4
    # workers making theirs at once in a new database failed with "table message_store
    # already exists". An application makes its table once at startup; so does the bench.
    make(f"bench-{RUN}-setup")
    return Store("langchain (python)", "sqlite", make, lambda conv, msgs: make(conv).add_messages(msgs))


def redis_store(url):
    from langchain_community.chat_message_histories import RedisChatMessageHistory

    def make(conv):
        return RedisChatMessageHistory(session_id=conv, url=url)

    return Store("langchain (python)", "redis", make, lambda conv, msgs: make(conv).add_messages(msgs))


def postgres_store(url):
    import psycopg
    from langchain_postgres import PostgresChatMessageHistory

    table = "bench_chat_history"
    conn_url = url.replace("postgres://", "postgresql://", 1)
    with psycopg.connect(conn_url) as c:
        PostgresChatMessageHistory.create_tables(c, table)
    local = threading.local()

    def make(conv):
        # One connection per thread, as psycopg's sync connections are used.
        if not hasattr(local, "conn"):
            local.conn = psycopg.connect(conn_url, autocommit=True)
        import uuid

        sid = str(uuid.uuid5(uuid.NAMESPACE_URL, conv))
        return PostgresChatMessageHistory(table, sid, sync_connection=local.conn)

    return Store("langchain (python)", "postgres", make, lambda conv, msgs: make(conv).add_messages(msgs))


def seed_messages(n):
    return [HumanMessage(user_text(k // 2)) if k % 2 == 0 else AIMessage(answer_text(k // 2)) for k in range(n)]


def threads(workers, turns, fn):
    errors, done = [], [0] * workers

    def body(w):
        try:
            for t in range(turns):
                fn(w, t)
                done[w] += 1
        except Exception as e:  # a worker stops at its first error, reported with the result
            errors.append(repr(e))

    ts = [threading.Thread(target=body, args=(w,)) for w in range(workers)]
    started = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return time.perf_counter() - started, (errors[0] if errors else None), sum(done)


def per_worker(cache, w, make):
    if w not in cache:
        cache[w] = make()
    return cache[w]


def check_w4(texts, workers, turns):
    pos = {}
    for i, t in enumerate(texts):
        if t.startswith("<w") and ">" in t:
            pos.setdefault(t[: t.index(">") + 1], []).append(i)
    lost = dup = inter = 0
    for w in range(workers):
        for t in range(turns):
            u, a = pos.get(tag(w, t, "u")), pos.get(tag(w, t, "a"))
            if not u or not a:
                lost += 1
                continue
            if len(u) > 1 or len(a) > 1:
                dup += 1
            if a[0] != u[0] + 1:
                inter += 1
    return {"expected_turns": workers * turns, "lost": lost, "duplicated": dup, "interleaved": inter}


def bench_store(st):
    if runs("W3"):
        for h in HISTORIES:
            conv = f"bench-{RUN}-w3-{h}"
            started = time.perf_counter()
            for k in range(0, h, 5000):
                st.seed(conv, seed_messages(min(5000, h - k)) if k == 0 else [HumanMessage(user_text((k + j) // 2)) if (k + j) % 2 == 0 else AIMessage(answer_text((k + j) // 2)) for j in range(min(5000, h - k))])
            hist = st.make(conv)
            s = measure(lc_turn(hist, by_count(W3_MESSAGES)), 3, STORE_TURNS, STORE_CAP)
            emit("W3", st.system, st.store, history=h, seed_seconds=round(time.perf_counter() - started, 1), **summary(s))
            progress(f"W3 {st.store} {h} done")
    if runs("W4"):
        conv = f"bench-{RUN}-w4-shared"
        trim = by_count(W3_MESSAGES)
        # One history per worker, made in the worker's own thread (psycopg connections are per thread).
        shared_h, own_h = {}, {}

        def shared(w, t):
            h = per_worker(shared_h, w, lambda: st.make(conv))
            lc_turn(h, trim)(t, user_text(t, tag(w, t, "u")), answer_text(t, tag(w, t, "a")))

        wall, err, _ = threads(SHARED_WORKERS, W4_TURNS, shared)
        texts = [m.content for m in st.make(conv).messages]
        emit("W4-shared", st.system, st.store, workers=SHARED_WORKERS, seconds=wall, error=err, **check_w4(texts, SHARED_WORKERS, W4_TURNS))

        def own(w, t):
            h = per_worker(own_h, w, lambda: st.make(f"bench-{RUN}-w4-own-{w}"))
            lc_turn(h, trim)(t)

        wall, err, n = threads(OWN_WORKERS, W4_OWN_TURNS, own)
        emit("W4-own", st.system, st.store, workers=OWN_WORKERS, turns=n, seconds=wall, turns_per_s=n / wall, error=err)
        progress(f"W4 {st.store} done")


def main():
    in_memory()
    with tempfile.TemporaryDirectory() as d:
        bench_store(sqlite_store(os.path.join(d, "langchain.db")))
    if os.environ.get("CHATMEM_TEST_PG_URL"):
        bench_store(postgres_store(os.environ["CHATMEM_TEST_PG_URL"]))
    if os.environ.get("CHATMEM_TEST_REDIS_URL"):
        bench_store(redis_store(os.environ["CHATMEM_TEST_REDIS_URL"]))


if __name__ == "__main__":
    main()
