"""The Python peers' side of the benchmark: langchain-core (InMemoryChatMessageHistory +
trim_messages), langchain-community (SQLite and Redis histories), langchain-postgres and
llama-index-core (ChatMemoryBuffer), each configured as its docs show, on the workloads of
bench-chatmem. One JSON line per result on stdout; bench/run.sh runs it in bench/.venv.

Beside them (issue 27), W3 and W4 through chatmem's own Python adapter,
chatmem.langchain.ChatmemChatMessageHistory, over a `chatmem serve` this script starts on each
store (participants chatmem-serve-sqlite, -postgres, -redis), and through LangGraph's
checkpointers (langgraph-sqlite, langgraph-postgres: a StateGraph(MessagesState) whose one node
calls a fake chat model). Every W3 row of a store-backed participant also says how many bytes
the store grew by per turn (bytes_per_turn, and bytes_what for how that is measured).

Run with: bench/.venv/bin/python bench/python/peers.py [--quick]
Environment: BENCH_ONLY (workloads), BENCH_PARTICIPANTS (comma-separated: memory,
langchain-sqlite, langchain-postgres, langchain-redis, chatmem-serve-sqlite,
chatmem-serve-postgres, chatmem-serve-redis, langgraph-sqlite, langgraph-postgres; default
all), BENCH_HISTORIES (W3's histories, e.g. 10,10000), CHATMEM_BIN (the chatmem binary;
default target/release/chatmem, then target/debug/chatmem), CHATMEM_TEST_PG_URL,
CHATMEM_TEST_REDIS_URL.
"""

import json
import os
import socket
import sqlite3
import statistics
import subprocess
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
if os.environ.get("BENCH_HISTORIES"):
    HISTORIES = [int(h) for h in os.environ["BENCH_HISTORIES"].split(",") if h.strip()]
PARTICIPANTS = [p.strip() for p in os.environ.get("BENCH_PARTICIPANTS", "").split(",") if p.strip()]
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


def wants(participant):
    return not PARTICIPANTS or participant in PARTICIPANTS


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
    """One store-backed participant. `make(conv)` is a LangChain history; `seed(conv, msgs)`
    appends messages outside the timing; `size(conv)` is the store's bytes (None: not measured,
    `size_what` says what is counted). `turn(conv)`, if given, replaces the LangChain turn
    (LangGraph's is a graph invocation); `texts(conv)` is the conversation's whole history as
    texts for W4; `own` runs W4's 64 own conversations too; `max_history` caps W3's histories
    (the rest are reported skipped)."""

    def __init__(self, system, store, make, seed, size=None, size_what=None, turn=None, texts=None, own=True, seed_chunk=5000, max_history=None, why_capped=None):
        self.system, self.store, self.make, self.seed = system, store, make, seed
        self.size, self.size_what, self.own, self.seed_chunk = size, size_what, own, seed_chunk
        self.max_history, self.why_capped = max_history, why_capped
        self.turn = turn or (lambda conv: lc_turn(make(conv), by_count(W3_MESSAGES)))
        self.texts = texts or (lambda conv: [m.content for m in make(conv).messages])


def sqlite_bytes(path):
    """The SQLite database's bytes on disk, its WAL checkpointed into the file first (a WAL is
    reused after a checkpoint, so its own size says little): what the stored data takes."""
    try:
        c = sqlite3.connect(path, timeout=10)
        try:
            c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        finally:
            c.close()
    except sqlite3.Error:
        pass
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))


SQLITE_WHAT = "database file + -wal growth, WAL checkpointed (TRUNCATE) before each reading"
PG_WHAT = "pg_total_relation_size growth (heap, TOAST, indexes) of the participant's tables"
REDIS_WHAT = "MEMORY USAGE (SAMPLES 0) growth of the conversation's keys"


def pg_url(url, database=None):
    from urllib.parse import urlsplit, urlunsplit

    u = urlsplit(url.replace("postgres://", "postgresql://", 1))
    if database is not None:
        u = u._replace(path="/" + database)
    return urlunsplit(u)


def pg_fresh_database(url, name):
    """A new, empty database on the test server for one participant (its tables, sizes and
    cleanup its own); dropped by pg_drop_database."""
    import psycopg

    with psycopg.connect(pg_url(url), autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        c.execute(f'CREATE DATABASE "{name}"')
    return pg_url(url, name)


def pg_drop_database(url, name):
    import psycopg

    try:
        with psycopg.connect(pg_url(url), autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    except Exception as e:
        progress(f"dropping database {name}: {e!r}")


def pg_tables_bytes(url, tables=None):
    """pg_total_relation_size summed over `tables`, or over every table of schema public."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as c:
        if tables:
            q = "SELECT coalesce(sum(pg_total_relation_size(to_regclass(t))), 0) FROM unnest(%s::text[]) t"
            return int(c.execute(q, (tables,)).fetchone()[0])
        q = "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'r'"
        return int(c.execute(q).fetchone()[0])


def redis_bytes(url, keys):
    import redis

    r = redis.Redis.from_url(url)
    try:
        return sum(r.execute_command("MEMORY", "USAGE", k, "SAMPLES", "0") or 0 for k in keys)
    finally:
        r.close()


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
    return Store("langchain (python)", "sqlite", make, lambda conv, msgs: make(conv).add_messages(msgs), size=lambda conv: sqlite_bytes(path), size_what=SQLITE_WHAT)


def redis_store(url):
    from langchain_community.chat_message_histories import RedisChatMessageHistory

    def make(conv):
        return RedisChatMessageHistory(session_id=conv, url=url)

    return Store(
        "langchain (python)", "redis", make, lambda conv, msgs: make(conv).add_messages(msgs),
        size=lambda conv: redis_bytes(url, ["message_store:" + conv]), size_what=REDIS_WHAT,
    )


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

    return Store(
        "langchain (python)", "postgres", make, lambda conv, msgs: make(conv).add_messages(msgs),
        size=lambda conv: pg_tables_bytes(conn_url, [table]), size_what=PG_WHAT,
    )


# ---- chatmem serve, through chatmem's Python adapter ----


def chatmem_bin():
    """CHATMEM_BIN, else the workspace's release build, else its debug build; None if none."""
    if os.environ.get("CHATMEM_BIN"):
        b = os.environ["CHATMEM_BIN"]
        return b if os.access(b, os.X_OK) else None
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(root, "target")
    for kind in ("release", "debug"):
        b = os.path.join(target, kind, "chatmem")
        if os.access(b, os.X_OK):
            return b
    return None


class Server:
    """`chatmem serve` on a free loopback port: by default the window policy of the W3 peers
    (20 messages), evicted messages kept as history (W3's history is stored, W4 reads it all);
    `args`, when given, are its flags instead."""

    def __init__(self, binary, store_url, log_dir, args=None):
        import httpx

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        self.log_path = os.path.join(log_dir, f"serve-{port}.log")
        self.log = open(self.log_path, "wb")
        flags = ["--max-messages", str(W3_MESSAGES), "--retention", "keep-history"] if args is None else list(args)
        cmd = [binary, "serve", "--listen", f"127.0.0.1:{port}", "--store", store_url, *flags]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"chatmem serve exited with {self.proc.returncode}: {self.tail()}")
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"chatmem serve did not answer /healthz in 60 s: {self.tail()}")
            time.sleep(0.05)

    def tail(self):
        self.log.flush()
        with open(self.log_path, "rb") as f:
            return f.read()[-2000:].decode(errors="replace")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


def serve_store(server, store, size, size_what):
    from chatmem import Client
    from chatmem.langchain import ChatmemChatMessageHistory

    clients = []

    def client():
        c = Client(server.url)
        clients.append(c)
        return c

    main = client()

    def make(conv):
        # A worker's history has a client (an httpx connection pool) of its own, as separate
        # processes of an application would.
        return ChatmemChatMessageHistory(conv, client=client())

    def seed(conv, msgs):
        # A request holds at most 1 MiB: 200 of the bench's messages fit.
        h = ChatmemChatMessageHistory(conv, client=main)
        for k in range(0, len(msgs), 200):
            h.add_messages(msgs[k : k + 200])

    def texts(conv):
        return [m["content"] for m in main.iter_history(conv, limit=1000)]

    st = Store("chatmem-serve", store, make, seed, size=size, size_what=size_what, texts=texts, own=False)
    st.client, st.clients = main, clients
    return st


def bench_serve(store, store_url, size, size_what, log_dir):
    """chatmem-serve-<store>: start the server, run W3 and W4 through the adapter, delete what
    was written (the SQLite file and a PostgreSQL database go with the caller), stop it."""
    participant = f"chatmem-serve-{store}"
    try:
        import chatmem.langchain  # noqa: F401
    except ImportError as e:
        return skip(participant, "chatmem-serve", store, f"the chatmem Python package is not installed ({e})")
    binary = chatmem_bin()
    if binary is None:
        return skip(participant, "chatmem-serve", store, "no chatmem binary: set CHATMEM_BIN or build target/release/chatmem (cargo build --release -p chatmem-cli)")
    try:
        server = Server(binary, store_url, log_dir)
    except RuntimeError as e:  # reported, not fatal: the other participants still run
        return skip(participant, "chatmem-serve", store, str(e))
    progress(f"{participant}: {binary} serve on {server.url}")
    try:
        st = serve_store(server, store, size, size_what)
        convs = bench_store(st)
        for conv in convs:
            try:
                st.client.delete_conversation(conv)
            except Exception:
                pass
        for c in st.clients:
            c.close()
    finally:
        rc = server.stop()
        if rc not in (0, None, -15):
            progress(f"{participant}: chatmem serve exited with {rc}: {server.tail()}")


def skip(participant, system, store, reason):
    progress(f"{participant}: skipped: {reason}")
    emit("skipped", system, store, participant=participant, reason=reason)


# ---- LangGraph: a MessagesState graph with a fake model, on a checkpointer ----

LANGGRAPH_MAX_HISTORY = int(os.environ.get("BENCH_LANGGRAPH_MAX_HISTORY", "10000"))
LANGGRAPH_CAP_WHY = (
    "every LangGraph checkpoint rewrites the whole message list: pre-filling and timing a history "
    "past {max:,} messages does not finish within the per-case cap (BENCH_LANGGRAPH_MAX_HISTORY)"
)


def langgraph_store(store, saver, size, size_what):
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langgraph.graph import START, MessagesState, StateGraph

    trim = by_count(W3_MESSAGES)
    answers = {}  # the answer the fake model gives to each user text (W4's texts are unique)

    def model(state: MessagesState):
        # As LangGraph's docs manage a long history: trim to the window, then call the model.
        window = trim(state["messages"])
        llm = GenericFakeChatModel(messages=iter([AIMessage(answers.pop(window[-1].content))]))
        return {"messages": [llm.invoke(window)]}

    g = StateGraph(MessagesState)
    g.add_node("model", model)
    g.add_edge(START, "model")
    graph = g.compile(checkpointer=saver)

    def config(conv):
        return {"configurable": {"thread_id": conv}}

    def turn_for(conv):
        def turn(i, u=None, a=None):
            u = u or user_text(i)
            answers[u] = a or answer_text(i)
            out = graph.invoke({"messages": [HumanMessage(u)]}, config(conv))
            assert out["messages"][-1].type == "ai"

        return turn

    def seed(conv, msgs):
        # Pre-filling by turns would rewrite the list once per turn: the history goes in as one
        # state update (one checkpoint), outside the timing.
        graph.update_state(config(conv), {"messages": msgs}, as_node="model")

    def texts(conv):
        return [m.content for m in graph.get_state(config(conv)).values.get("messages", [])]

    return Store(
        "langgraph", store, None, seed, size=size, size_what=size_what, turn=turn_for, texts=texts,
        own=False, seed_chunk=10**9, max_history=LANGGRAPH_MAX_HISTORY,
        why_capped=LANGGRAPH_CAP_WHY.format(max=LANGGRAPH_MAX_HISTORY),
    )


def seed_messages(n, start=0):
    return [HumanMessage(user_text(k // 2)) if k % 2 == 0 else AIMessage(answer_text(k // 2)) for k in range(start, start + n)]


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
    """W3 and W4 on one participant; returns the conversation ids it wrote."""
    convs = []
    if runs("W3"):
        for h in HISTORIES:
            if st.max_history is not None and h > st.max_history:
                progress(f"W3 {st.system} {st.store} {h}: skipped: {st.why_capped}")
                emit("W3-skipped", st.system, st.store, history=h, reason=st.why_capped)
                continue
            conv = f"bench-{RUN}-w3-{h}"
            convs.append(conv)
            started = time.perf_counter()
            for k in range(0, h, st.seed_chunk):
                st.seed(conv, seed_messages(min(st.seed_chunk, h - k), k))
            seed_seconds = time.perf_counter() - started
            before = st.size(conv) if st.size else None
            turn, written = st.turn(conv), [0]

            def counted(i):
                written[0] += 1
                turn(i)

            s = measure(counted, 3, STORE_TURNS, STORE_CAP)
            extra = {}
            if st.size:
                # Every turn of the case wrote (warm-up included): the growth over all of them.
                grown = st.size(conv) - before
                extra = {"bytes_per_turn": round(grown / written[0]), "turns_written": written[0], "bytes_what": st.size_what}
            emit("W3", st.system, st.store, history=h, seed_seconds=round(seed_seconds, 1), **extra, **summary(s))
            progress(f"W3 {st.system} {st.store} {h} done")
    if runs("W4"):
        conv = f"bench-{RUN}-w4-shared"
        convs.append(conv)
        # One history (or turn) per worker, made in the worker's own thread (psycopg
        # connections are per thread).
        shared_h, own_h = {}, {}

        def shared(w, t):
            turn = per_worker(shared_h, w, lambda: st.turn(conv))
            turn(t, user_text(t, tag(w, t, "u")), answer_text(t, tag(w, t, "a")))

        wall, err, _ = threads(SHARED_WORKERS, W4_TURNS, shared)
        emit("W4-shared", st.system, st.store, workers=SHARED_WORKERS, seconds=wall, error=err, **check_w4(st.texts(conv), SHARED_WORKERS, W4_TURNS))

        if st.own:

            def own(w, t):
                turn = per_worker(own_h, w, lambda: st.turn(f"bench-{RUN}-w4-own-{w}"))
                turn(t)

            wall, err, n = threads(OWN_WORKERS, W4_OWN_TURNS, own)
            convs += [f"bench-{RUN}-w4-own-{w}" for w in range(OWN_WORKERS)]
            emit("W4-own", st.system, st.store, workers=OWN_WORKERS, turns=n, seconds=wall, turns_per_s=n / wall, error=err)
        progress(f"W4 {st.system} {st.store} done")
    return convs


def bench_langgraph_sqlite(d):
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = os.path.join(d, "langgraph.db")
    # The saver serializes its connection's use with a lock, as its docs say.
    conn = sqlite3.connect(path, check_same_thread=False)
    try:
        saver = SqliteSaver(conn)
        saver.setup()
        bench_store(langgraph_store("sqlite", saver, lambda conv: sqlite_bytes(path), SQLITE_WHAT))
    finally:
        conn.close()


def bench_langgraph_postgres(url):
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    name = f"bench_{RUN}_langgraph"
    db = pg_fresh_database(url, name)
    try:
        # A pool as LangGraph's docs set one up for a server: W4's 16 writers each take a connection.
        kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
        with ConnectionPool(db, max_size=SHARED_WORKERS, kwargs=kwargs) as pool:
            saver = PostgresSaver(pool)
            saver.setup()
            bench_store(langgraph_store("postgres", saver, lambda conv: pg_tables_bytes(db), PG_WHAT))
    finally:
        pg_drop_database(url, name)


def main():
    if wants("memory"):
        in_memory()
    if not (runs("W3") or runs("W4")):
        return
    pg, rd = os.environ.get("CHATMEM_TEST_PG_URL"), os.environ.get("CHATMEM_TEST_REDIS_URL")
    with tempfile.TemporaryDirectory() as d:
        if wants("langchain-sqlite"):
            bench_store(sqlite_store(os.path.join(d, "langchain.db")))
        if wants("chatmem-serve-sqlite"):
            path = os.path.join(d, "chatmem.db")
            bench_serve("sqlite", f"sqlite:{path}", lambda conv: sqlite_bytes(path), SQLITE_WHAT, d)
        if wants("langgraph-sqlite"):
            bench_langgraph_sqlite(d)
        if pg and wants("langchain-postgres"):
            bench_store(postgres_store(pg))
        if pg and wants("chatmem-serve-postgres"):
            name = f"bench_{RUN}_chatmem"
            db = pg_fresh_database(pg, name)
            try:
                bench_serve("postgres", db, lambda conv: pg_tables_bytes(db), PG_WHAT, d)
            finally:
                pg_drop_database(pg, name)
        if pg and wants("langgraph-postgres"):
            bench_langgraph_postgres(pg)
        if rd and wants("langchain-redis"):
            bench_store(redis_store(rd))
        if rd and wants("chatmem-serve-redis"):

            def keys(conv):
                t = conv.encode().hex()
                return [f"chatmem:{{{t}}}:meta", f"chatmem:{{{t}}}:msgs"]

            bench_serve("redis", rd, lambda conv: redis_bytes(rd, keys(conv)), REDIS_WHAT, d)


if __name__ == "__main__":
    main()
