"""The knowledge base at scale: indexing, memory, query latency, re-indexing under load.

    python benchmarks/bench_kb.py [--docs 100000] [--rounds 2] [--repeat 20] [--json]

Generates N documents of about 900 bytes (``kb_corpus.py``; once, under benchmarks/.cache/),
then measures, for the current ``KnowledgeBase`` ("new") and, as the baseline, the
implementation this one replaced ("old", loaded from git at ``BASELINE_COMMIT``):

* indexing: wall time of the constructor on a fresh index, and for "new" the time to open
  an existing index again (a restart);
* memory: the process's resident set (VmRSS) after indexing and after the queries, and its
  peak (VmHWM), each implementation in a fresh process of its own;
* queries: ``search(term, limit=5)`` for 2-character Chinese terms and English words, common
  and rare (``kb_corpus.query_terms``); medians and p99 of old and new interleaved call by
  call in one process, so both see the same machine load;
* one changed file: the time from rewriting a file to the search that finds its new title,
  while another thread keeps searching (whose latencies are reported too).

Old and new processes alternate, ``--rounds`` times. Nothing here is asserted: read medians
and ratios; the machine is shared.

    python benchmarks/bench_kb.py --index-only [--against COMMIT] [--rounds 3]

times the first build alone (wall, CPU of the process and its index workers, the load
average around it) for the tree and for the package of an earlier commit (``--against``,
by default the commit before the first build was made faster), in fresh processes
alternated round by round, and checks that both give the same hits (``pinned_hits``).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

import kb_corpus

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(__file__).resolve().parent / ".cache"
BASELINE_COMMIT = "4e84407"  # the last commit with the single-module, in-memory KB
INDEX_BASELINE = "84b2019"  # the first build before it was made faster (issue 10, K2)
Search = Callable[..., list[Any]]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def memory() -> dict[str, float]:
    """Resident and peak resident memory of this process, in MB (Linux /proc)."""
    found: dict[str, float] = {}
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = int(value.split()[0]) / 1024
    return {"rss_mb": round(found["VmRSS"], 1), "peak_mb": round(found["VmHWM"], 1)}


# --------------------------------------------------------------------------- implementations


def baseline_module() -> Any:
    """The old kb.py, from git, imported as a module of its own."""
    path = CACHE / f"kb_baseline_{BASELINE_COMMIT}.py"
    if not path.exists():
        source = subprocess.run(
            ["git", "show", f"{BASELINE_COMMIT}:src/lingyi/backends/kb.py"],
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("kb_baseline", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["kb_baseline"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def open_kb(impl: str, folder: Path, db_path: Path | None = None) -> Any:
    if impl == "old":
        # Its change check ran on the request path once a second (a full rescan); off for
        # the query figures, on for the re-index one (see child).
        return baseline_module().KnowledgeBase(
            folder, domains=kb_corpus.DOMAINS, check_interval=3600
        )
    from lingyi.backends.kb import KnowledgeBase

    return KnowledgeBase(folder, domains=kb_corpus.DOMAINS, db_path=db_path)


# --------------------------------------------------------------------------- child: one impl


def cpu_s() -> float:
    """CPU seconds of this process and of its finished children (index workers)."""
    own, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def child(impl: str, folder: Path, repeat: int, edits: int) -> dict[str, Any]:
    """Everything measured in one fresh process for one implementation."""
    start, cpu = time.perf_counter(), cpu_s()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "index.sqlite" if impl == "new" else None
        kb = open_kb(impl, folder, db)
        out: dict[str, Any] = {"impl": impl, "docs": len(kb)}
        out["index_s"] = round(time.perf_counter() - start, 2)
        out["index_cpu_s"] = round(cpu_s() - cpu, 2)
        out["after_index"] = memory()
        out["queries"] = query_latencies({impl: kb.search}, repeat)[impl]
        out["after_queries"] = memory()
        if impl == "old":
            kb._check_interval = 1.0  # its own change detection, as shipped
        out["reindex"] = reindex_under_load(kb, folder, edits)
        out["end"] = memory()
        if impl == "new":
            kb.close()
            start, cpu = time.perf_counter(), cpu_s()
            open_kb(impl, folder, db).close()
            out["reopen_s"] = round(time.perf_counter() - start, 2)
            out["reopen_cpu_s"] = round(cpu_s() - cpu, 2)
    return out


def query_latencies(searches: dict[str, Search], repeat: int) -> dict[str, dict[str, Any]]:
    """Wall and CPU p50/p99 per kind of term; implementations interleaved call by call."""
    terms = kb_corpus.query_terms()
    walls: dict[str, dict[str, list[float]]] = {i: {k: [] for k in terms} for i in searches}
    cpus: dict[str, dict[str, list[float]]] = {i: {k: [] for k in terms} for i in searches}
    for search in searches.values():  # warm-up: page cache, statements
        for words in terms.values():
            for term in words:
                search(term, 5)
    for _ in range(repeat):
        for kind, words in terms.items():
            for term in words:
                for name, search in searches.items():
                    c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
                    search(term, 5)
                    walls[name][kind].append((time.perf_counter_ns() - t0) / 1e6)
                    cpus[name][kind].append((time.thread_time_ns() - c0) / 1e6)
    return {
        name: {
            kind: {**summary(walls[name][kind]), "cpu": summary(cpus[name][kind])} for kind in terms
        }
        for name in searches
    }


def summary(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50_ms": round(statistics.median(values), 3),
        "p99_ms": round(percentile(values, 0.99), 3),
        "max_ms": round(max(values), 3),
    }


def reindex_under_load(kb: Any, folder: Path, edits: int) -> dict[str, Any]:
    """Rewrite one file at a time; time until a search finds its new title, while another
    thread searches without pause (and, for "new", the re-index of one file by itself)."""
    terms = [t for ts in kb_corpus.query_terms().values() for t in ts]
    stop = threading.Event()
    latencies: list[float] = []

    def searcher() -> None:
        i = 0
        while not stop.is_set():
            t0 = time.perf_counter_ns()
            kb.search(terms[i % len(terms)], 5)
            latencies.append((time.perf_counter_ns() - t0) / 1e6)
            i += 1

    thread = threading.Thread(target=searcher, daemon=True)
    thread.start()
    time.sleep(5.0)  # past the watcher's first full check, which runs as it starts
    latencies.clear()
    start = time.perf_counter()
    visible = [edit_and_wait(kb, folder, n) for n in range(edits)]
    direct = [reindex_one(kb, folder, n) for n in range(edits)] if hasattr(kb, "_indexer") else []
    during, took = list(latencies), time.perf_counter() - start
    latencies.clear()
    poll_for_nothing(kb, min(took, 30.0))  # the control: the same load, no edit
    stop.set()
    thread.join()
    out = {"edits": edits, "visible": summary(visible), "searches": summary(during)}
    out["searches_no_edits"] = summary(latencies)
    return {**out, "one_file": summary(direct)} if direct else out


def edit_and_wait(kb: Any, folder: Path, n: int, timeout_s: float = 300.0) -> float:
    """ms from rewriting document n*997 with a new title until search returns it."""
    i = (n * 997) % len(kb)
    rel, text = kb_corpus.Corpus().document(i)
    marker = f"editmark{n}x{os.getpid()}"
    path = folder / rel
    original = path.read_text(encoding="utf-8")
    t0 = time.perf_counter()
    path.write_text(text.replace("\ntitle: ", f"\ntitle: {marker} ", 1), encoding="utf-8")
    try:
        while not any(hit.id == f"kb:bench-{i:06d}" for hit in kb.search(marker, 5)):
            if time.perf_counter() - t0 > timeout_s:
                return float("inf")
            time.sleep(0.002)
        return (time.perf_counter() - t0) * 1000
    finally:
        path.write_text(original, encoding="utf-8")


def poll_for_nothing(kb: Any, seconds: float) -> None:
    """What edit_and_wait does while it waits, for a marker that never appears."""
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        kb.search("nomarkerxyz", 5)
        time.sleep(0.002)


def reindex_one(kb: Any, folder: Path, n: int) -> float:
    """ms to re-index one changed file by itself (read, parse, replace, commit)."""
    rel, _ = kb_corpus.Corpus().document((n * 991) % len(kb))
    t0 = time.perf_counter()
    kb._indexer.update([rel])
    return (time.perf_counter() - t0) * 1000


# --------------------------------------------------------------------------- child: both


def interleaved(folder: Path, repeat: int) -> dict[str, Any]:
    """Query latencies of old and new in one process, call by call, plus how far the new
    ranking's top 5 agrees with the old exhaustive one."""
    with tempfile.TemporaryDirectory() as tmp:
        new = open_kb("new", folder, Path(tmp) / "index.sqlite")
        old = open_kb("old", folder)
        out = query_latencies({"old": old.search, "new": new.search}, repeat)
        out["top5_agreement"] = agreement(old.search, new.search)
        new.close()
    return out


def agreement(old: Search, new: Search) -> dict[str, dict[str, float]]:
    """How close the new top 5 is to the old exhaustive ranking, per kind of query: the
    share of the old top-5 ids it also returns, and the sum of its scores over the sum of
    the old top 5's (the same bm25 × coverage², so 1.0 means as relevant)."""
    result = {}
    for kind, words in kb_corpus.query_terms().items():
        shared = total = 0
        ratios = []
        for term in words:
            before, after = old(term, 5), new(term, 5)
            shared += len({h.id for h in before} & {h.id for h in after})
            total += len(before)
            if before:
                ratios.append(sum(h.score for h in after) / sum(h.score for h in before))
        result[kind] = {
            "ids": round(shared / max(1, total), 3),
            "score": round(statistics.mean(ratios), 3) if ratios else 1.0,
        }
    return result


# --------------------------------------------------------------------------- first build only


def index_child(folder: Path) -> dict[str, Any]:
    """One first build in this fresh process: times, load, memory, and a digest of hits."""
    from lingyi.backends.kb import KnowledgeBase

    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        start, cpu, own = time.perf_counter(), cpu_s(), time.process_time()
        db = Path(tmp) / "index.sqlite"
        kb = KnowledgeBase(folder, domains=kb_corpus.DOMAINS, db_path=db, watch=False)
        wall, used, own = time.perf_counter() - start, cpu_s() - cpu, time.process_time() - own
        hits, docs = pinned_hits(kb.search), len(kb)
        kb.close()
    return {
        "docs": docs,
        "index_s": round(wall, 2),
        "index_cpu_s": round(used, 2),
        "index_cpu_writer_s": round(own, 2),  # this process: SQLite; the rest is the workers
        "load": [round(load, 2), round(os.getloadavg()[0], 2)],
        "peak_mb": memory()["peak_mb"],
        "hits_sha256": hashlib.sha256(json.dumps(hits, ensure_ascii=False).encode()).hexdigest(),
    }


def pinned_hits(search: Search) -> list[Any]:
    """Every hit (id, score, snippet...) of the timed queries and a few more, with and
    without a domain, at two limits: what must not change when the build gets faster."""
    queries = [q for qs in kb_corpus.query_terms().values() for q in qs]
    queries += ["气", "道", "the", "qigong tea", "量子 物理"]
    return [
        [hit.model_dump() for hit in search(q, limit, domain)]
        for q in queries
        for domain in (None, kb_corpus.DOMAINS[2])
        for limit in (5, 50)
    ]


def index_rounds(docs: int, against: str, rounds: int) -> dict[str, Any]:
    """The tree ("after") and ``against`` ("before") alternated, a fresh process each."""
    sources = {"before": str(exported_src(against)), "after": str(ROOT / "src")}
    runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    for n in range(rounds):
        for name in ("before", "after") if n % 2 == 0 else ("after", "before"):
            env = {**os.environ, "PYTHONPATH": sources[name]}
            runs[name].append(run_child(["--child", "index", "--docs", str(docs)], env))
    return {"docs": docs, "against": against, "runs": runs}


def exported_src(commit: str) -> Path:
    """The ``src`` folder of ``commit``, exported once under the cache (not a work tree)."""
    target = CACHE / f"src-{commit}"
    if not (target / "src").exists():
        target.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(
            ["git", "archive", commit, "src"], cwd=ROOT, check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target / "src"


def index_table(report: dict[str, Any]) -> str:
    runs = report["runs"]
    lines = [f"First build of {report['docs']:,} documents; before = {report['against']}", ""]
    lines += [
        "| | wall median (min–max) | CPU median (min–max) | of it the writer | load 1 min "
        "| peak | hits |"
    ]
    lines.append("|---|---:|---:|---:|---:|---:|---|")
    digests = {r["hits_sha256"] for rs in runs.values() for r in rs}
    for name, rs in runs.items():
        walls, cpus = [r["index_s"] for r in rs], [r["index_cpu_s"] for r in rs]
        loads = [x for r in rs for x in r["load"]]
        lines.append(
            f"| {name} | {spread(walls)} s | {spread(cpus)} s"
            f" | {writer_cpu(rs)}"
            f" | {min(loads)}–{max(loads)}"
            f" | {max(r['peak_mb'] for r in rs):.0f} MB"
            f" | {'same' if len(digests) == 1 else 'DIFFER'} |"
        )
    return "\n".join(lines)


def writer_cpu(runs: list[dict[str, Any]]) -> str:
    """The median CPU of the writing process alone (not reported by older runs)."""
    own = [r["index_cpu_writer_s"] for r in runs if "index_cpu_writer_s" in r]
    return f"{statistics.median(own):.1f} s" if own else "–"


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} ({min(values):.1f}–{max(values):.1f})"


# --------------------------------------------------------------------------- orchestration


def run_child(args: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), *args]
    done = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT, env=env)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=20, help="passes over the query terms")
    parser.add_argument("--edits", type=int, default=20, help="file rewrites timed (new)")
    parser.add_argument("--impl", choices=["old", "new", "both"], default="both")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--index-only", action="store_true", help="time the first build alone")
    parser.add_argument("--against", default=INDEX_BASELINE, help="commit for --index-only")
    parser.add_argument("--child", choices=["old", "new", "both", "index"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))  # stdout: JSON
    folder = kb_corpus.write_corpus(CACHE / f"kb-{args.docs}", args.docs)
    if args.child == "index":
        print(json.dumps(index_child(folder)))
        return
    if args.index_only:
        report = index_rounds(args.docs, args.against, args.rounds)
        print(json.dumps(report, indent=2) if args.json else index_table(report))
        return
    if args.child:
        result = (
            interleaved(folder, args.repeat)
            if args.child == "both"
            else child(args.child, folder, args.repeat, args.edits if args.child == "new" else 1)
        )
        print(json.dumps(result))
        return
    impls = ["old", "new"] if args.impl == "both" else [args.impl]
    common = ["--docs", str(args.docs), "--repeat", str(args.repeat), "--edits", str(args.edits)]
    runs = [run_child(["--child", i, *common]) for _ in range(args.rounds) for i in impls]
    both = run_child(["--child", "both", *common]) if args.impl == "both" else None
    report = {"docs": args.docs, "bytes": kb_corpus.sizes(folder)[1], "runs": runs, "both": both}
    print(json.dumps(report, indent=2) if args.json else table(report))


def table(report: dict[str, Any]) -> str:
    lines = [f"{report['docs']:,} documents, {report['bytes']:.0f} bytes on average", ""]
    lines += [
        "| run | index (CPU) | reopen | RSS, peak | change visible p50 / max | one file "
        "| searches during edits p50 / p99 / max | without edits |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in report["runs"]:
        ri, one = r["reindex"], r["reindex"].get("one_file")
        one_ms = f"{one['p50_ms']:.1f} ms" if one else "–"
        quiet = ri["searches_no_edits"]
        lines.append(
            f"| {r['impl']} | {r['index_s']} s ({r['index_cpu_s']} s) | {r.get('reopen_s', '–')} s"
            f" | {r['end']['rss_mb']:.0f} MB, {r['end']['peak_mb']:.0f} MB"
            f" | {ri['visible']['p50_ms']:.0f} / {ri['visible']['max_ms']:.0f} ms"
            f" | {one_ms}"
            f" | {ri['searches']['p50_ms']} / {ri['searches']['p99_ms']} / "
            f"{ri['searches']['max_ms']:.0f} ms | {quiet['p50_ms']} / {quiet['p99_ms']} / "
            f"{quiet['max_ms']:.0f} ms |"
        )
    lines += [
        "",
        "| run | terms | p50 | p99 | CPU p50 | CPU p99 |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for r in report["runs"]:
        lines += [query_row(r["impl"], kind, q) for kind, q in r["queries"].items()]
    if both := report["both"]:
        lines += ["", "Interleaved in one process:", ""]
        lines += ["| terms | old p50 / p99 | new p50 / p99 | ratio p50 / p99 | top-5 ids, score |"]
        lines.append("|---|---:|---:|---:|---:|")
        for kind, agree in both["top5_agreement"].items():
            o, n = both["old"][kind], both["new"][kind]
            lines.append(
                f"| {kind} | {o['p50_ms']} / {o['p99_ms']} ms | {n['p50_ms']} / {n['p99_ms']} ms"
                f" | {n['p50_ms'] / o['p50_ms']:.3f}× / {n['p99_ms'] / o['p99_ms']:.3f}×"
                f" | {agree['ids']}, {agree['score']} |"
            )
    return "\n".join(lines)


def query_row(run: str, kind: str, q: dict[str, Any]) -> str:
    cpu = q["cpu"]
    return (
        f"| {run} | {kind} | {q['p50_ms']} ms | {q['p99_ms']} ms | {cpu['p50_ms']} ms"
        f" | {cpu['p99_ms']} ms |"
    )


if __name__ == "__main__":
    main()
