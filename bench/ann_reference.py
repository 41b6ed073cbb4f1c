#!/usr/bin/env python3
"""Measure the reference HNSW implementations on the vectors `idem bench ann
--export DIR` wrote, with the same parameters, and compare them with idem's.

    /usr/bin/python3 bench/ann_reference.py DIR

Needs numpy and hnswlib (Debian: python3-numpy python3-hnswlib); FAISS
(python3-faiss) is measured too when it is installed. Everything runs on one
thread. Reads DIR/meta.json, base.f32, queries.f32, truth.i32; if
DIR/report.json (idem's run) is there, prints idem's numbers beside
hnswlib's and their ratio. Writes DIR/reference.json.
"""

import json
import os
import sys
import tempfile
import time

import numpy as np


def load(d):
    with open(os.path.join(d, "meta.json")) as f:
        meta = json.load(f)
    n, q, dim, k = meta["n"], meta["queries"], meta["dim"], meta["k"]
    base = np.fromfile(os.path.join(d, "base.f32"), dtype="<f4").reshape(n, dim)
    queries = np.fromfile(os.path.join(d, "queries.f32"), dtype="<f4").reshape(q, dim)
    truth = np.fromfile(os.path.join(d, "truth.i32"), dtype="<i4").reshape(q, k)
    return meta, base, queries, truth


def recall(labels, truth):
    k = truth.shape[1]
    first = float(np.mean(labels[:, 0] == truth[:, 0]))
    common = sum(len(set(a[:k]) & set(b)) for a, b in zip(labels, truth))
    return first, common / (len(truth) * k)


def timed_search(search, queries):
    """The faster of two passes, as idem's benchmark does: queries per
    second of wall time and of process CPU time."""
    best, best_cpu, labels = None, None, None
    for _ in range(2):
        c, t = cpu(), time.perf_counter()
        labels = search(queries)
        s, cs = time.perf_counter() - t, cpu() - c
        best = s if best is None else min(best, s)
        best_cpu = cs if best_cpu is None else min(best_cpu, cs)
    return labels, len(queries) / best, len(queries) / max(best_cpu, 1e-9)


def cpu():
    r = os.times()
    return r.user + r.system


def run_hnswlib(meta, base, queries, truth):
    import hnswlib

    idx = hnswlib.Index(space="ip", dim=meta["dim"])
    idx.init_index(max_elements=meta["n"], ef_construction=meta["ef_construction"],
                   M=meta["m"], random_seed=meta["seed"])
    idx.set_num_threads(1)
    c0, t0 = cpu(), time.perf_counter()
    idx.add_items(base, np.arange(meta["n"]), num_threads=1)
    build, build_cpu = time.perf_counter() - t0, cpu() - c0
    with tempfile.NamedTemporaryFile() as f:
        idx.save_index(f.name)
        size = os.path.getsize(f.name)
    out = []
    for ef in meta["ef_search"]:
        idx.set_ef(ef)
        labels, qps, qcpu = timed_search(lambda qs: idx.knn_query(qs, k=meta["k"], num_threads=1)[0], queries)
        r1, rk = recall(labels, truth)
        out.append(dict(index="hnswlib", ef_search=ef, recall_at_1=r1, recall_at_k=rk, queries_per_s=qps, queries_per_cpu_s=qcpu,
                        build_s=build, build_cpu_s=build_cpu, bytes_per_vector=size / meta["n"]))
    return out


def run_faiss(meta, base, queries, truth):
    import faiss

    faiss.omp_set_num_threads(1)
    idx = faiss.IndexHNSWFlat(meta["dim"], meta["m"], faiss.METRIC_INNER_PRODUCT)
    idx.hnsw.efConstruction = meta["ef_construction"]
    c0, t0 = cpu(), time.perf_counter()
    idx.add(base)
    build, build_cpu = time.perf_counter() - t0, cpu() - c0
    size = len(faiss.serialize_index(idx))
    out = []
    for ef in meta["ef_search"]:
        idx.hnsw.efSearch = ef
        labels, qps, qcpu = timed_search(lambda qs: idx.search(qs, meta["k"])[1], queries)
        r1, rk = recall(labels, truth)
        out.append(dict(index="faiss-hnsw", ef_search=ef, recall_at_1=r1, recall_at_k=rk, queries_per_s=qps, queries_per_cpu_s=qcpu,
                        build_s=build, build_cpu_s=build_cpu, bytes_per_vector=size / meta["n"]))
    return out


def row(r):
    ef = str(r.get("ef_search") or "-")
    b = r.get("bytes_per_vector") or 0
    return "%-11s %9s %9.4f %10.4f %11.0f %11.0f %9.1f %11.1f %9s" % (
        r["index"], ef, r["recall_at_1"], r["recall_at_k"], r["queries_per_s"], r["queries_per_cpu_s"], r["build_s"],
        r["build_cpu_s"], "%.0f" % b if b else "-")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: ann_reference.py DIR  (DIR from idem bench ann --export DIR)")
    d = sys.argv[1]
    meta, base, queries, truth = load(d)
    results = run_hnswlib(meta, base, queries, truth)
    try:
        results += run_faiss(meta, base, queries, truth)
    except ImportError:
        print("faiss not installed: skipped", file=sys.stderr)
    with open(os.path.join(d, "reference.json"), "w") as f:
        json.dump(results, f, indent=2)
    ours = []
    if os.path.exists(os.path.join(d, "report.json")):
        with open(os.path.join(d, "report.json")) as f:
            ours = json.load(f)["Results"]
    print("N %d, %d queries, %d-d, k %d, M %d, efConstruction %d, one thread\n" % (
        meta["n"], meta["queries"], meta["dim"], meta["k"], meta["m"], meta["ef_construction"]))
    print("%-11s %9s %9s %10s %11s %11s %9s %11s %9s" % (
        "index", "efSearch", "recall@1", "recall@%d" % meta["k"], "queries/s", "q/cpu s", "build s", "build cpu s",
        "B/vector"))
    for r in ours + results:
        print(row(r))
    ref = {r["ef_search"]: r for r in results if r["index"] == "hnswlib"}
    mine = [r for r in ours if r["index"] == "idem-hnsw"]
    if mine:
        print("\nidem-hnsw / hnswlib:")
        for r in mine:
            h = ref.get(r["ef_search"])
            if h:
                print("  efSearch %4d: queries/s %.2f (per cpu s %.2f), build time %.2f (cpu %.2f), bytes/vector %.2f,"
                      " recall@%d %+.4f" % (
                    r["ef_search"], r["queries_per_s"] / h["queries_per_s"],
                    r["queries_per_cpu_s"] / h["queries_per_cpu_s"], r["build_s"] / h["build_s"],
                    r["build_cpu_s"] / h["build_cpu_s"], r["bytes_per_vector"] / h["bytes_per_vector"],
                    meta["k"], r["recall_at_k"] - h["recall_at_k"]))


if __name__ == "__main__":
    main()
