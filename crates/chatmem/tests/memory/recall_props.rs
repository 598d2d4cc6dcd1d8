//! Property tests of recall's pure parts: text analysis ([`terms`], [`query_terms`]), the
//! reference index ([`MemoryIndex`]) against a brute-force BM25, and [`choose`] over random
//! hits and settings.

use std::collections::HashSet;

use chatmem::recall::{
    IndexTerms, LexicalHit, MAX_TERM_BYTES, MemoryIndex, Outcome, RECALL_HEADING, SearchQuery, SearchResult, bm25,
    choose, query_terms, rounded, terms,
};
use chatmem::store::{Commit, Snapshot, StoredMessage};
use chatmem::{Heuristic, Message, Recall, TokenCounter, ToolCall};
use proptest::prelude::*;

/// Text mixing words of a small vocabulary (so terms repeat), CJK, digits, punctuation and
/// case.
fn text() -> impl Strategy<Value = String> {
    let word = prop::sample::select(vec![
        "order",
        "Order",
        "ORDER",
        "refund",
        "退款",
        "订单",
        "我的订单",
        "LC2026",
        "ＬＣ２０２６",
        "parcel",
        "a_b",
        "it's",
        "—",
        "!",
        " ",
        "  ",
        "\n",
        "é",
        "É",
        "ß",
        "カタカナ",
        "주문",
        "42",
        "3.14",
        "\"",
        "*",
        "NEAR",
    ]);
    prop::collection::vec(word, 0..24).prop_map(|w| w.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn terms_are_non_empty_folded_bounded_and_stable(t in text()) {
        let found = terms(&t);
        for term in &found {
            prop_assert!(!term.is_empty());
            prop_assert!(term.len() <= MAX_TERM_BYTES);
            prop_assert_eq!(&term.to_lowercase(), term);
            // A term analyzed again is itself (or, for a CJK pair, its pairs): the query side and
            // the index side agree on every term.
            prop_assert!(terms(term).contains(term), "{:?} → {:?}", term, terms(term));
        }
        let q = query_terms(&t);
        let distinct: HashSet<&String> = found.iter().collect();
        prop_assert_eq!(q.len(), distinct.len());
        let index = IndexTerms::of(&Message::user(t.clone()));
        prop_assert_eq!(index.len as usize, found.len());
        prop_assert_eq!(index.terms.iter().map(|(_, n)| *n as usize).sum::<usize>(), found.len());
    }

    #[test]
    fn the_reference_index_is_bm25_over_every_indexed_message(
        texts in prop::collection::vec(text(), 1..30),
        query in text(),
        before in 1u64..40,
        limit in 0usize..12,
    ) {
        let mut builder = Commit::on(&Snapshot::empty()).index(true);
        for t in &texts {
            builder = builder.append(Message::user(t.clone()), 1);
        }
        let commit = builder.build().unwrap();
        let mut index = MemoryIndex::new();
        index.add(commit.index(), 7);
        let messages: Vec<StoredMessage> = commit.appended().to_vec();
        let q = query_terms(&query);
        let found = index.search(&SearchQuery::new(q.clone(), before, limit), |seq| {
            messages.iter().find(|m| m.seq == seq).cloned()
        });
        // Brute force: every message analyzed on its own.
        let docs: Vec<Vec<String>> = texts.iter().map(|t| terms(t)).collect();
        let total: u64 = docs.iter().map(|d| d.len() as u64).sum();
        let df: Vec<u64> = q.iter().map(|t| docs.iter().filter(|d| d.contains(t)).count() as u64).collect();
        prop_assert_eq!((found.docs, found.total_len, &found.df), (docs.len() as u64, total, &df));
        let mut want: Vec<(f64, u64)> = docs
            .iter()
            .enumerate()
            .map(|(i, d)| (i as u64 + 1, d))
            .filter(|&(seq, d)| seq < before && q.iter().any(|t| d.contains(t)))
            .map(|(seq, d)| {
                let tf: Vec<u32> = q.iter().map(|t| d.iter().filter(|w| *w == t).count() as u32).collect();
                (rounded(bm25(docs.len() as u64, total, &df, d.len() as u32, &tf)), seq)
            })
            .collect();
        want.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)));
        want.truncate(limit);
        let got: Vec<u64> = found.hits.iter().map(|h| h.message.seq).collect();
        prop_assert_eq!(got, want.iter().map(|w| w.1).collect::<Vec<_>>());
        prop_assert!(found.hits.iter().all(|h| h.at_micros == 7));
    }

    #[test]
    fn choose_keeps_its_promises(
        hits in prop::collection::vec((0u32..4, 1u32..40, 0u8..3, 0usize..6), 0..30),
        k in 1usize..8,
        floor in 0.0f64..0.6,
        budget in 0usize..400,
        recall_budget in 0usize..400,
    ) {
        // Hits: term frequencies of a two-term query, a length, a role (user, a call, its
        // result) and a call id (shared between calls and results, so some results find theirs).
        let docs = 60;
        let found = SearchResult::new(
            docs,
            docs * 10,
            vec![3, 20],
            hits.iter()
                .enumerate()
                .map(|(i, &(tf, len, role, call))| {
                    let seq = i as u64 + 1;
                    let message = match role {
                        0 => Message::user(format!("message {seq}")),
                        1 => Message::assistant_tool_calls(vec![ToolCall::new(format!("c{call}"), "get_order", "{}")]),
                        _ => Message::tool_result(format!("c{call}"), format!("result {seq}")),
                    };
                    LexicalHit::new(StoredMessage::new(seq, 1, message), 0, len, vec![tf, (seq % 3) as u32])
                })
                .filter(|h| h.tf.iter().any(|&t| t > 0))
                .collect(),
        );
        let recall = Recall::new(k).unwrap().min_relevance(floor).unwrap().max_tokens(recall_budget);
        let counter = Heuristic;
        let chosen = choose(&found, &recall, budget, &counter);
        prop_assert_eq!(&chosen, &choose(&found, &recall, budget, &counter), "deterministic");
        prop_assert_eq!(chosen.considered.len(), found.hits.len());
        let ranks: Vec<usize> = chosen.considered.iter().map(|c| c.lexical_rank).collect();
        prop_assert_eq!(ranks, (1..=found.hits.len()).collect::<Vec<_>>());
        for pair in chosen.considered.windows(2) {
            let (a, b) = (rounded(pair[0].score), rounded(pair[1].score));
            prop_assert!(a > b || (a == b && pair[0].seq > pair[1].seq), "ranked by score, then the newer");
        }
        let injected: Vec<_> = chosen.injected().collect();
        prop_assert!(injected.len() <= k);
        prop_assert!(injected.windows(2).all(|w| w[0].seq < w[1].seq), "oldest first");
        for c in &chosen.considered {
            let below = c.relevance < floor || c.relevance <= 0.0;
            prop_assert_eq!(c.outcome == Outcome::BelowThreshold, below, "{:?}", c);
        }
        for c in &injected {
            if let Some(call) = c.message.tool_call_id() {
                prop_assert!(
                    injected.iter().any(|o| o.message.tool_calls().iter().any(|t| t.id == call)),
                    "result {} came without its call", c.seq
                );
            }
        }
        match &chosen.message {
            None => prop_assert!(injected.is_empty() && chosen.tokens == 0),
            Some(m) => {
                prop_assert!(!injected.is_empty());
                prop_assert_eq!(chosen.tokens, counter.count_message(m));
                prop_assert!(chosen.tokens <= budget.min(recall_budget), "{} tokens", chosen.tokens);
                let text = m.text().unwrap().into_owned();
                prop_assert!(text.starts_with(RECALL_HEADING));
                prop_assert_eq!(text.lines().count(), injected.len() + 1);
            }
        }
    }
}
