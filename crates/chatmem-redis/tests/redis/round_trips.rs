//! Counts the commands a load, a commit, a search and each facts call send, from `INFO commandstats`
//! deltas: one `EVALSHA` each (or, for a load of a conversation the store has seen, one
//! `MULTI`/`EXEC` transaction), plus exactly the commands that script runs inside Redis (commandstats
//! counts those too), so any extra client command would show. Kept alone in its test
//! binary so no parallel test of this crate adds commands while it measures. The
//! Cluster variant sums the deltas over all primaries of the test cluster.

mod common;

use std::collections::BTreeMap;

use chatmem::facts::{FactLimits, add};
use chatmem::store::{Commit, FactsCommit, StoredFacts, StoredMessage};
use chatmem::{ChatMemory, ConversationId, Heuristic, Message, Retention, Store, Summary, UserId};
use chatmem_test::commit_full;
use common::{cleanup, raw, store, unique_prefix, url};
use redis::aio::MultiplexedConnection;

/// The counters are the server's, so the tests of this binary take turns: one test's commands
/// would otherwise show in another's counts.
static ALONE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// `cmdstat_<name>` -> calls.
async fn command_calls(conn: &mut MultiplexedConnection) -> BTreeMap<String, u64> {
    let info: String = redis::cmd("INFO").arg("commandstats").query_async(conn).await.unwrap();
    info.lines()
        .filter_map(|line| {
            let (name, rest) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = rest.split(',').find_map(|kv| kv.strip_prefix("calls="))?.parse().ok()?;
            Some((name.to_owned(), calls))
        })
        .collect()
}

/// The commands run between two snapshots, the measuring `INFO` itself left out.
fn delta(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    after
        .iter()
        .filter(|(name, _)| name.as_str() != "info")
        .filter_map(|(name, calls)| {
            let d = calls - before.get(name).copied().unwrap_or(0);
            (d > 0).then(|| (name.clone(), d))
        })
        .collect()
}

/// Keeps the smaller of two command deltas, so that a stray client of the shared server
/// cannot fail the test (each measurement is repeated), only a store that sends more.
fn fewest(best: Option<BTreeMap<String, u64>>, d: BTreeMap<String, u64>) -> Option<BTreeMap<String, u64>> {
    match best {
        Some(b) if b.values().sum::<u64>() <= d.values().sum::<u64>() => Some(b),
        _ => Some(d),
    }
}

/// `pairs` as a command delta.
fn map(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
}

/// What every commit script runs: the script, the server's time, the version check, the
/// appended messages and the recency index, the meta hash; plus `rest`.
fn commit_script(rest: &[(&str, u64)]) -> BTreeMap<String, u64> {
    let script = [("evalsha", 1), ("time", 1), ("hmget", 1), ("zadd", 2), ("hset", 1)];
    map(&[&script[..], rest].concat())
}

/// How many conversations a [`recent`](Store::recent) listing of every prefix (10 at most)
/// finds.
async fn listed(store: &chatmem_redis::RedisStore) -> usize {
    store
        .recent(&chatmem::store::RecentQuery::new("", None, 10))
        .await
        .unwrap()
        .conversations
        .len()
}

fn turn(seq: u64) -> Vec<StoredMessage> {
    vec![
        StoredMessage::new(seq, 4, Message::user(format!("u{seq}"))),
        StoredMessage::new(seq + 1, 4, Message::assistant(format!("a{seq}"))),
    ]
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_URL"]
async fn load_and_commit_are_one_round_trip_each() {
    let _alone = ALONE.lock().await;
    let url = url();
    let prefix = unique_prefix("round-trips");
    let store = store(&url, &prefix).await;
    let mut conn = raw(&url).await;
    let id = ConversationId::new("rt").unwrap();
    // Warm up: the first call of each script may need a SCRIPT LOAD.
    let mut version = store
        .commit(
            &id,
            commit_full(
                0,
                1,
                Some(StoredMessage::new(1, 3, Message::system("rules"))),
                turn(1),
                1,
                Retention::KeepHistory,
                Some(std::time::Duration::from_secs(600)),
            ),
        )
        .await
        .unwrap();
    store.load(&id).await.unwrap();

    let (mut loads, mut first_loads, mut commits, mut turns) = (None, None, None, None);
    let memory = ChatMemory::new(store.clone());
    let mut next = 3;
    for _ in 0..5 {
        let before = command_calls(&mut conn).await;
        store.load(&id).await.unwrap();
        loads = fewest(loads, delta(&before, &command_calls(&mut conn).await));
        // A store that has not seen the conversation yet.
        let fresh = common::store(&url, &prefix).await;
        let before = command_calls(&mut conn).await;
        fresh.load(&id).await.unwrap();
        first_loads = fewest(first_loads, delta(&before, &command_calls(&mut conn).await));

        let c = commit_full(
            version,
            next,
            None,
            turn(next),
            next,
            Retention::DropEvicted,
            Some(std::time::Duration::from_secs(600)),
        );
        let before = command_calls(&mut conn).await;
        store.commit(&id, c).await.unwrap();
        commits = fewest(commits, delta(&before, &command_calls(&mut conn).await));

        // A ChatMemory turn (load, then the model call, then commit) is two round trips.
        let before = command_calls(&mut conn).await;
        let mut turn = memory.begin(&id).await.unwrap();
        turn.extend([Message::user("q"), Message::assistant("a")]);
        let after = turn.commit_window().await.unwrap();
        turns = fewest(turns, delta(&before, &command_calls(&mut conn).await));
        version = after.snapshot().version;
        next = after.snapshot().next_seq;
    }
    let (loads, first_loads, commits, turns) = (loads.unwrap(), first_loads.unwrap(), commits.unwrap(), turns.unwrap());
    eprintln!(
        "load commands: {loads:?}\nfirst load commands: {first_loads:?}\ncommit commands: {commits:?}\nChatMemory turn commands: {turns:?}"
    );
    // A conversation this store has seen: HMGET + ZRANGEBYSCORE from its window start in one
    // MULTI/EXEC, sent together (no script).
    assert_eq!(
        loads,
        map(&[("multi", 1), ("hmget", 1), ("zrangebyscore", 1), ("exec", 1)]),
        "load = 1 round trip"
    );
    // One it has not: one EVALSHA; HMGET + ZRANGEBYSCORE run inside the script.
    assert_eq!(
        first_loads,
        map(&[("evalsha", 1), ("hmget", 1), ("zrangebyscore", 1)]),
        "first load = 1 round trip"
    );
    // One EVALSHA; inside: the server's time, version check, append, meta with the new
    // version, eviction, TTL on both keys, the time in the recency index (the index entry
    // was made when the conversation was).
    assert_eq!(
        commits,
        commit_script(&[("zremrangebyscore", 1), ("pexpire", 2)]),
        "commit = 1 round trip"
    );
    // A ChatMemory turn: the load's transaction and the commit script. The memory has no TTL
    // and the store's commit before it set one: PTTL finds it and both keys are PERSISTed.
    assert_eq!(
        turns,
        map(&[
            ("multi", 1),
            ("exec", 1),
            ("evalsha", 1),
            ("time", 1),
            ("hmget", 2),
            ("zrangebyscore", 1),
            ("zadd", 2),
            ("hset", 1),
            ("zremrangebyscore", 1),
            ("pttl", 1),
            ("persist", 2),
        ]),
        "a ChatMemory turn = 2 round trips"
    );

    // With a summary: the commit stores it in the same HSET and deletes below a bound under
    // the window start in the same ZREMRANGEBYSCORE; the load reads it in the same HMGET.
    let (mut summarized, mut summary_loads) = (None, None);
    for _ in 0..3 {
        let snap = store.load(&id).await.unwrap();
        let covered = snap.summary.as_ref().map_or(snap.window_start, |s| s.upto) + 1;
        let c = Commit::on(&snap)
            .retention(Retention::DropEvicted)
            .keep_unsummarized()
            .summary(
                Summary::new(format!("up to {covered}"), covered, &Heuristic),
                snap.summary.as_ref().map_or(0, |s| s.upto),
            )
            .append(Message::user("q"), 2)
            .window_start(snap.next_seq)
            .build()
            .unwrap();
        assert!(
            c.delete_below().is_some_and(|b| b < c.window_start()),
            "a bound under the window start"
        );
        let before = command_calls(&mut conn).await;
        store.commit(&id, c).await.unwrap();
        summarized = fewest(summarized, delta(&before, &command_calls(&mut conn).await));
        let before = command_calls(&mut conn).await;
        assert!(store.load(&id).await.unwrap().summary.is_some());
        summary_loads = fewest(summary_loads, delta(&before, &command_calls(&mut conn).await));
    }
    let (summarized, summary_loads) = (summarized.unwrap(), summary_loads.unwrap());
    eprintln!("summarized commit commands: {summarized:?}\nload with a summary: {summary_loads:?}");
    assert_eq!(summary_loads, loads, "a load with a summary = 1 round trip");
    assert_eq!(
        summarized,
        commit_script(&[("zremrangebyscore", 1), ("pttl", 1)]),
        "a commit with a summary = 1 round trip"
    );
    // Listing by recency: one script reads the recency index, checks each listed
    // conversation's TTL and answers the page.
    let mut listings = None;
    for _ in 0..3 {
        let before = command_calls(&mut conn).await;
        assert_eq!(listed(&store).await, 1);
        listings = fewest(listings, delta(&before, &command_calls(&mut conn).await));
    }
    assert_eq!(
        listings.unwrap(),
        map(&[("evalsha", 1), ("time", 1), ("zrevrange", 1), ("pttl", 1)]),
        "recent = 1 round trip"
    );
    eprintln!("round trips: load = 1, commit = 1");
    cleanup(&url, &prefix).await;
}

/// Indexed commits on `id` of `store` (its first creating it): one of enough messages to
/// write posting lists at once, then small ones whose entries stay pending.
async fn seed_indexed(store: &chatmem_redis::RedisStore, id: &ConversationId) {
    let mut snap = chatmem::store::Snapshot::empty();
    for round in 0..4 {
        let n = if round == 0 { 40 } else { 2 };
        let mut builder = Commit::on(&snap).index(true).retention(Retention::KeepHistory);
        for k in 0..n {
            builder = builder.append(Message::user(format!("order LC{round}{k} refund parcel {k}")), 5);
        }
        let commit = builder.window_start(snap.next_seq + n - 2).build().unwrap();
        store.commit(id, commit).await.unwrap();
        snap = store.load(id).await.unwrap();
    }
}

/// What a search may run inside its script: reads only.
const SEARCH_COMMANDS: [&str; 4] = ["evalsha", "hget", "hmget", "zrangebyscore"];

fn a_search(id: &ConversationId) -> (ConversationId, chatmem::recall::SearchQuery) {
    let terms = chatmem::recall::query_terms("refund order LC01 parcel 7");
    (id.clone(), chatmem::recall::SearchQuery::new(terms, 40, 10))
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_URL"]
async fn a_search_and_an_indexed_commit_are_one_round_trip_each() {
    let _alone = ALONE.lock().await;
    let url = url();
    let prefix = unique_prefix("round-trips-recall");
    let store = store(&url, &prefix).await;
    let mut conn = raw(&url).await;
    let id = ConversationId::new("rt-recall").unwrap();
    seed_indexed(&store, &id).await;
    let (id, query) = a_search(&id);
    // Warm up: the first run of the script may need a SCRIPT LOAD.
    assert_eq!(store.search(&id, &query).await.unwrap().hits.len(), 10);
    let mut searches = None;
    for _ in 0..5 {
        let before = command_calls(&mut conn).await;
        let found = store.search(&id, &query).await.unwrap();
        searches = fewest(searches, delta(&before, &command_calls(&mut conn).await));
        assert_eq!(found.hits.len(), 10);
    }
    let searches = searches.unwrap();
    eprintln!("search commands: {searches:?}");
    assert_eq!(searches.get("evalsha"), Some(&1), "search = 1 round trip: {searches:?}");
    assert!(
        searches.keys().all(|c| SEARCH_COMMANDS.contains(&c.as_str())),
        "a search only reads: {searches:?}"
    );
    // A commit with index entries: still the one script, pending entries or a merge alike.
    for n in [2u64, 40] {
        let mut commits = None;
        for _ in 0..3 {
            let snap = store.load(&id).await.unwrap();
            let mut builder = Commit::on(&snap).index(true).retention(Retention::KeepHistory);
            for k in 0..n {
                builder = builder.append(Message::assistant(format!("parcel {k} shipped")), 5);
            }
            let c = builder.window_start(snap.next_seq).build().unwrap();
            let before = command_calls(&mut conn).await;
            store.commit(&id, c).await.unwrap();
            commits = fewest(commits, delta(&before, &command_calls(&mut conn).await));
        }
        let commits = commits.unwrap();
        eprintln!("indexed commit of {n} commands: {commits:?}");
        assert_eq!(commits.get("evalsha"), Some(&1), "commit = 1 round trip: {commits:?}");
        assert!(
            commits.keys().all(|c| [
                "evalsha",
                "time",
                "hmget",
                "hget",
                "zadd",
                "hset",
                "pttl",
                "zremrangebyscore"
            ]
            .contains(&c.as_str())),
            "{commits:?}"
        );
    }
    cleanup(&url, &prefix).await;
}

/// The commands run on all primaries of the test cluster (`CHATMEM_TEST_REDIS_CLUSTER_URL`)
/// while `op` runs, the measuring `INFO` and the client's topology queries left out.
async fn cluster_delta<F: std::future::Future<Output = ()>>(
    nodes: &mut [MultiplexedConnection],
    op: F,
) -> BTreeMap<String, u64> {
    let mut before = Vec::new();
    for n in nodes.iter_mut() {
        before.push(command_calls(n).await);
    }
    op.await;
    let mut total: BTreeMap<String, u64> = BTreeMap::new();
    for (n, before) in nodes.iter_mut().zip(&before) {
        for (name, d) in delta(before, &command_calls(n).await) {
            if name != "cluster" && name != "ping" {
                *total.entry(name).or_default() += d;
            }
        }
    }
    total
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_CLUSTER_URL"]
async fn cluster_round_trips() {
    let _alone = ALONE.lock().await;
    let url = common::cluster_url();
    let prefix = unique_prefix("cluster-round-trips");
    let store = store(&url, &prefix).await;
    let hosts = url.trim_start_matches("redis+cluster://");
    let mut nodes = Vec::new();
    for host in hosts.split(',') {
        nodes.push(raw(&format!("redis://{host}")).await);
    }
    // Warm up: load the scripts on every node.
    for i in 0..20 {
        let id = ConversationId::new(format!("warm-{i}")).unwrap();
        store.load(&id).await.unwrap();
        let c = chatmem_test::commit(0, turn(1), 1, Retention::KeepHistory);
        store.commit(&id, c).await.unwrap();
        store.clear(&id).await.unwrap();
    }
    let (mut creates, mut loads, mut commits, mut clears) = (None, None, None, None);
    for round in 0..3 {
        let id = ConversationId::new(format!("rt-{round}")).unwrap();
        let c = chatmem_test::commit(0, turn(1), 1, Retention::KeepHistory);
        let d = cluster_delta(&mut nodes, async { assert_eq!(store.commit(&id, c).await.unwrap(), 1) }).await;
        creates = fewest(creates, d);
        let d = cluster_delta(&mut nodes, async { drop(store.load(&id).await.unwrap()) }).await;
        loads = fewest(loads, d);
        let c = chatmem_test::commit(1, turn(3), 1, Retention::KeepHistory);
        let d = cluster_delta(&mut nodes, async { assert_eq!(store.commit(&id, c).await.unwrap(), 2) }).await;
        commits = fewest(commits, d);
        let d = cluster_delta(&mut nodes, async { assert!(store.clear(&id).await.unwrap()) }).await;
        clears = fewest(clears, d);
    }
    let (creates, loads, commits, clears) = (creates.unwrap(), loads.unwrap(), commits.unwrap(), clears.unwrap());
    eprintln!("cluster: create {creates:?}\nload {loads:?}\ncommit {commits:?}\nclear {clears:?}");
    assert_eq!(
        loads,
        map(&[("evalsha", 1), ("hmget", 1), ("zrangebyscore", 1)]),
        "load = 1 round trip"
    );
    // One EVALSHA, which returns its node's time (the indexes are not touched inside the
    // script), then the ZADD of that time to the recency index, in another slot.
    assert_eq!(commits, commit_script(&[("pttl", 1)]), "commit = 2 round trips");
    // ZADD index + ZADD NX recency index (one pipeline, one slot), EVALSHA (inside: DEL,
    // ZADD messages, ...), ZADD index + ZADD GT recency index.
    assert_eq!(
        creates,
        map(&[
            ("zadd", 5),
            ("time", 1),
            ("evalsha", 1),
            ("hmget", 1),
            ("del", 1),
            ("hset", 1),
            ("pttl", 1)
        ]),
        "creating commit = 3 round trips"
    );
    // EVALSHA (inside: EXISTS, DEL), ZREM index + ZREM recency index (one pipeline),
    // EXISTS re-check.
    assert_eq!(
        clears,
        map(&[("evalsha", 1), ("exists", 2), ("del", 1), ("zrem", 2)]),
        "clear = 3 round trips"
    );
    // Listing by recency: the recent script on the index's node, then one check script
    // (its node's time and the meta key's PTTL) per listed conversation, sent at once.
    let id = ConversationId::new("rt-recent").unwrap();
    let c = chatmem_test::commit(0, turn(1), 1, Retention::KeepHistory);
    store.commit(&id, c).await.unwrap();
    let mut listings = None;
    for _ in 0..3 {
        let d = cluster_delta(&mut nodes, async { assert_eq!(listed(&store).await, 1) }).await;
        listings = fewest(listings, d);
    }
    assert_eq!(
        listings.unwrap(),
        map(&[("evalsha", 2), ("time", 2), ("zrevrange", 1), ("pttl", 1)]),
        "recent = 2 round trips"
    );
    assert!(store.clear(&id).await.unwrap());
    // A search is one script on the conversation's node.
    let id = ConversationId::new("rt-recall").unwrap();
    seed_indexed(&store, &id).await;
    let (id, query) = a_search(&id);
    assert_eq!(store.search(&id, &query).await.unwrap().hits.len(), 10);
    let mut searches = None;
    for _ in 0..3 {
        let d = cluster_delta(&mut nodes, async {
            assert_eq!(store.search(&id, &query).await.unwrap().hits.len(), 10)
        })
        .await;
        searches = fewest(searches, d);
    }
    let searches = searches.unwrap();
    assert_eq!(searches.get("evalsha"), Some(&1), "search = 1 round trip: {searches:?}");
    assert!(
        searches.keys().all(|c| SEARCH_COMMANDS.contains(&c.as_str())),
        "{searches:?}"
    );
    assert!(store.clear(&id).await.unwrap());
    // Clean-up of this test's keys: the indexes; the conversations were cleared.
    let index = format!("{prefix}:ids");
    for n in &mut nodes {
        let _: redis::RedisResult<()> = redis::cmd("DEL").arg(&index).query_async(n).await;
        let _: redis::RedisResult<()> = redis::cmd("DEL")
            .arg(format!("{prefix}:{{{index}}}:recent"))
            .query_async(n)
            .await;
        let _: redis::RedisResult<()> = redis::cmd("DEL").arg(format!("{prefix}:schema")).query_async(n).await;
    }
}

/// `text` added by hand to `loaded`, as a facts commit.
fn adding_fact(loaded: &StoredFacts, text: &str) -> FactsCommit {
    let (added, _) = add(&loaded.set, text, None, &FactLimits::default(), 1_000).unwrap();
    FactsCommit::new(loaded, added).unwrap().unwrap()
}

/// Each facts call of `store` is one round trip: one `MULTI`/`EXEC` or one `EVALSHA`, and
/// inside only the commands named here. Measured over `nodes` (the one server, or every
/// primary of a Cluster: the user's keys are all on one of them).
async fn facts_calls_are_one_round_trip_each(store: &chatmem_redis::RedisStore, nodes: &mut [MultiplexedConnection]) {
    // Warm up: the first run of the script on a node may need a SCRIPT LOAD.
    for i in 0..20 {
        let user = UserId::new(format!("warm-{i}")).unwrap();
        store
            .commit_facts(&user, adding_fact(&StoredFacts::default(), "x"))
            .await
            .unwrap();
        store.forget_user(&user).await.unwrap();
    }
    let (mut unknown, mut creates, mut loads, mut commits, mut stale, mut histories, mut forgets) =
        (None, None, None, None, None, None, None);
    for round in 0..3 {
        let user = UserId::new(format!("facts-rt-{round}")).unwrap();
        let d = cluster_delta(nodes, async {
            assert_eq!(store.load_facts(&user).await.unwrap(), StoredFacts::default())
        })
        .await;
        unknown = fewest(unknown, d);
        // A commit creating the user with 200 facts at once.
        let mut changed = chatmem::facts::Changed {
            set: Default::default(),
            changes: Vec::new(),
        };
        for i in 0..200 {
            let (added, _) = add(
                &changed.set,
                &format!("Fact number {i}"),
                None,
                &FactLimits::default(),
                i,
            )
            .unwrap();
            changed = changed.then(added);
        }
        let create = FactsCommit::new(&StoredFacts::default(), changed).unwrap().unwrap();
        let d = cluster_delta(nodes, async {
            assert_eq!(store.commit_facts(&user, create).await.unwrap(), 1)
        })
        .await;
        creates = fewest(creates, d);
        let mut loaded = StoredFacts::default();
        let d = cluster_delta(nodes, async { loaded = store.load_facts(&user).await.unwrap() }).await;
        loads = fewest(loads, d);
        assert_eq!((loaded.set.len(), loaded.version), (200, 1));
        let d = cluster_delta(nodes, async {
            assert_eq!(
                store
                    .commit_facts(&user, adding_fact(&loaded, "One more"))
                    .await
                    .unwrap(),
                2
            )
        })
        .await;
        commits = fewest(commits, d);
        let d = cluster_delta(nodes, async {
            let e = store
                .commit_facts(&user, adding_fact(&loaded, "Stale"))
                .await
                .unwrap_err();
            assert!(e.is_conflict(), "{e}");
        })
        .await;
        stale = fewest(stale, d);
        let d = cluster_delta(nodes, async {
            assert_eq!(store.fact_history(&user, 201).await.unwrap().len(), 1)
        })
        .await;
        histories = fewest(histories, d);
        let d = cluster_delta(nodes, async { assert!(store.forget_user(&user).await.unwrap()) }).await;
        forgets = fewest(forgets, d);
    }
    let (unknown, loads, creates, commits, stale, histories, forgets) = (
        unknown.unwrap(),
        loads.unwrap(),
        creates.unwrap(),
        commits.unwrap(),
        stale.unwrap(),
        histories.unwrap(),
        forgets.unwrap(),
    );
    eprintln!("facts: load {loads:?}\ncreate {creates:?}\ncommit {commits:?}\nstale {stale:?}");
    let transaction = |inside: &[(&str, u64)]| map(&[&[("multi", 1), ("exec", 1)], inside].concat());
    assert_eq!(
        unknown,
        transaction(&[("hmget", 1), ("hgetall", 1)]),
        "load of an unknown user = 1 round trip"
    );
    assert_eq!(
        loads,
        transaction(&[("hmget", 1), ("hgetall", 1)]),
        "load of 200 facts = 1 round trip"
    );
    // The header's HMGET, the leftovers' DEL, the facts' HSET, the history's HMGET and HSET,
    // the header's HSET.
    assert_eq!(
        creates,
        map(&[("evalsha", 1), ("hmget", 2), ("del", 1), ("hset", 3)]),
        "a commit creating 200 facts = 1 round trip"
    );
    // The same, the stored ids' HKEYS in place of the DEL: only the new fact is written.
    assert_eq!(
        commits,
        map(&[("evalsha", 1), ("hmget", 2), ("hkeys", 1), ("hset", 3)]),
        "a commit on 200 facts = 1 round trip"
    );
    assert_eq!(
        stale,
        map(&[("evalsha", 1), ("hmget", 1)]),
        "a lost version check = 1 round trip, writing nothing"
    );
    assert_eq!(
        histories,
        transaction(&[("hget", 2)]),
        "a fact's history = 1 round trip"
    );
    assert_eq!(
        forgets,
        transaction(&[("hget", 1), ("del", 1)]),
        "forget_user = 1 round trip"
    );
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_URL"]
async fn facts_round_trips() {
    let _alone = ALONE.lock().await;
    let url = url();
    let prefix = unique_prefix("round-trips-facts");
    let store = store(&url, &prefix).await;
    facts_calls_are_one_round_trip_each(&store, &mut [raw(&url).await]).await;
    cleanup(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_CLUSTER_URL"]
async fn cluster_facts_round_trips() {
    let _alone = ALONE.lock().await;
    let url = common::cluster_url();
    let prefix = unique_prefix("cluster-round-trips-facts");
    let store = store(&url, &prefix).await;
    let mut nodes = Vec::new();
    for host in url.trim_start_matches("redis+cluster://").split(',') {
        nodes.push(raw(&format!("redis://{host}")).await);
    }
    facts_calls_are_one_round_trip_each(&store, &mut nodes).await;
    // The users were forgotten; the schema key is what is left.
    for n in &mut nodes {
        let _: redis::RedisResult<()> = redis::cmd("DEL").arg(format!("{prefix}:schema")).query_async(n).await;
    }
}
