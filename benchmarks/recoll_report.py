"""The report of compare_recoll.py: ratios deskdex/Recoll, targets met or missed, a Markdown table,
two PNG charts and the figures as JSON (so that a later run can be compared with this one)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# (key, label, unit, target ratio or None); lower is better except for throughput kept and quality
ROWS = [
    ("index_wall", "full index, wall time", "s", 1.0), ("index_cpu", "full index, CPU user+sys", "s", None),
    ("index_peak_rss", "full index, peak memory (largest RSS of the whole tree at one time)", "MiB", None),
    ("index_rss_sum", "full index, sum of every process's own peak RSS", "MiB", None),
    ("size", "index (+ store) size on disk", "MiB", 1.0), ("files_ok", "files indexed (top level)", "", None),
    ("documents", "documents indexed, members included", "", None),
    ("failed", "files failed (the file or one of its members)", "", None),
    ("failed_documents", "documents failed, members counted one by one", "", None),
    ("second_wall", "second full run, nothing changed", "s", None),
    ("second_cpu", "second run, CPU", "s", None),
    ("search_median", "search, command line, paths only, median", "s", 1.0),
    ("search_p95", "search, command line, paths only, p95", "s", None),
    ("search_snippets_median", "search, command line, with snippets (recollq -A), median", "s", None),
    ("search_no_daemon_median", "search, paths only, no deskdex daemon running, median", "s", None),
    ("fresh_median", "freshness, write to searchable, median", "s", 0.5),
    ("fresh_p95", "freshness, p95", "s", None), ("idle_cpu", "idle daemon CPU", "s", None),
    ("interference_kept", "CPU-bound program's throughput kept beside a full index", "", None),
    ("p_at_10", "search quality: precision at 10", "", None), ("mrr", "search quality: MRR", "", None),
]


def flat(r: dict[str, Any], name: str) -> dict[str, float | None]:
    t = r[name]
    return {"index_wall": t["index"]["wall"], "index_cpu": t["index"]["cpu"],
            "index_peak_rss": t["index"]["peak_rss_live"] / 2**20,
            "index_rss_sum": t["index"]["peak_rss_sum"] / 2**20, "size": t["size_bytes"] / 2**20,
            "documents": t["summary"]["documents"],
            "files_ok": sum(v.get("ok", 0) for v in t["per_format"].values()), "failed": t["summary"]["failed"],
            "second_wall": t["second"]["wall"], "second_cpu": t["second"]["cpu"],
            "failed_documents": t["summary"].get("failed_documents", t["summary"]["failed"]),
            "search_median": r["search"][name]["median"], "search_p95": r["search"][name]["p95"],
            "search_snippets_median": r.get("search_snippets", {}).get(name, {}).get("median"),
            "search_no_daemon_median": r.get("search_no_daemon", {}).get(name, {}).get("median"),
            "fresh_median": r["freshness"][name]["median"], "fresh_p95": r["freshness"][name]["p95"],
            "idle_cpu": r["idle"]["cpu"].get(name), "interference_kept": r["interference"][name]["kept"],
            "p_at_10": r["quality"][name]["p_at_10"], "mrr": r["quality"][name]["mrr"]}


def targets(r: dict[str, Any]) -> dict[str, tuple[bool, str]]:
    d, c, ratio = r["figures"]["deskdex"], r["figures"]["recoll"], r["ratios"]
    return {
        "index time <= Recoll's, no more failures": (
            ratio["index_wall"] is not None and ratio["index_wall"] <= 1.0 and d["failed"] <= c["failed"],
            f"ratio {ratio['index_wall']:.2f}, failed {d['failed']} vs {c['failed']}"),
        "search wall time <= Recoll's": (ratio["search_median"] <= 1.0, f"ratio {ratio['search_median']:.2f}"),
        "freshness <= half of Recoll's": (ratio["fresh_median"] is not None and ratio["fresh_median"] <= 0.5,
                                          f"ratio {ratio['fresh_median']}"),
        "index + store size <= Recoll's index": (ratio["size"] <= 1.0, f"ratio {ratio['size']:.2f}"),
        "idle CPU zero": ((d["idle_cpu"] or 0) <= 0.02, f"{d['idle_cpu']} s over {r['idle']['seconds']} s"),
        "interference >= 90% kept": (d["interference_kept"] >= 0.9, f"{d['interference_kept']:.0%} kept"),
    }


def _fmt(v: Any) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:.4f}" if abs(v) < 0.1 else f"{v:.3f}" if abs(v) < 10 else f"{v:.1f}"
    return str(v)


def markdown(r: dict[str, Any]) -> str:
    d, c, ratio = r["figures"]["deskdex"], r["figures"]["recoll"], r["ratios"]
    out = [f"# deskdex side by side with Recoll\n\n{r['when']}, {r['machine']}. Corpus: {r['corpus']} "
           f"({r['corpus_files']} files, {r['corpus_bytes'] / 1e6:.0f} MB). Recoll {r['recoll_version']}.\n"
           f"Reproduce: `{r['command']}`\n\n"
           "Ratios are the headline (deskdex / Recoll; below 1 means deskdex is smaller or faster): the machine "
           "is shared, so absolute times move between runs.\n",
           "| measure | deskdex | Recoll | deskdex/Recoll | target |", "|---|---:|---:|---:|---|"]
    for key, label, unit, target in ROWS:
        tgt = f"<= {target}" if target else ""
        out.append(f"| {label}{f' ({unit})' if unit else ''} | {_fmt(d[key])} | {_fmt(c[key])} | "
                   f"{_fmt(ratio[key])} | {tgt} |")
    out.append("\n## Targets\n")
    for name, (ok, why) in targets(r).items():
        out.append(f"- {'MET' if ok else 'MISSED'}: {name} ({why})")
    out.append("\n## Notes\n")
    out.extend(f"- {n}" for n in r["notes"])
    out.append("\n## Documents per format (top-level files: indexed ok / failed)\n")
    out.append("| format | deskdex ok | deskdex failed | Recoll ok | Recoll failed |\n|---|---:|---:|---:|---:|")
    fd, fr = r["deskdex"]["per_format"], r["recoll"]["per_format"]
    # Ties by name: a set's order changes with the hash seed, and a report written again from the
    # same JSON should not differ from the first.
    for fmt in sorted(set(fd) | set(fr),
                      key=lambda f: (-(fd.get(f, {}).get("ok", 0) + fr.get(f, {}).get("ok", 0)), f)):
        a, b = fd.get(fmt, {}), fr.get(fmt, {})
        out.append(f"| {fmt} | {a.get('ok', 0)} | {a.get('failed', 0)} | {b.get('ok', 0)} | {b.get('failed', 0)} |")
    out.append("\n## Search time by kind of query (median, s; deskdex through its daemon)\n\n"
               "| kind | deskdex paths | Recoll paths | deskdex snippets | Recoll snippets |\n|---|---:|---:|---:|---:|")
    snip = r.get("search_snippets", {})
    for kind, v in r["search"]["deskdex"]["by_kind_median"].items():
        s_d = snip.get("deskdex", {}).get("by_kind_median", {}).get(kind)
        s_r = snip.get("recoll", {}).get("by_kind_median", {}).get(kind)
        out.append(f"| {kind} | {v:.4f} | {r['search']['recoll']['by_kind_median'][kind]:.4f} | {_fmt(s_d)} | "
                   f"{_fmt(s_r)} |")
    out.append("\n## Search quality per query (precision at 10; rank of the first relevant result)\n\n"
               "| query | deskdex P@10 | deskdex first | Recoll P@10 | Recoll first |\n|---|---:|---:|---:|---:|")
    for a, b in zip(r["quality"]["deskdex"]["queries"], r["quality"]["recoll"]["queries"]):
        out.append(f"| {a['query']} | {a['p10']:.1f} | {a['first_relevant'] or '-'} | {b['p10']:.1f} | "
                   f"{b['first_relevant'] or '-'} |")
    out.append("\n![ratios](recoll-ratios.png)\n\n![figures](recoll-figures.png)\n")
    return "\n".join(out) + "\n"


def charts(r: dict[str, Any], outdir: Path) -> list[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    ratio = r["ratios"]
    keys = [k for k, *_ in ROWS if ratio.get(k) not in (None, 0) and k not in ("documents", "files_ok", "failed", "failed_documents",
                                                                       "idle_cpu")]
    labels = [next(lbl for k2, lbl, *_ in ROWS if k2 == k) for k in keys]
    fig, ax = plt.subplots(figsize=(9, 6))
    vals = [ratio[k] for k in keys]
    higher_better = {"interference_kept", "p_at_10", "mrr"}
    ax.barh(labels, vals, color=["tab:green" if (v >= 1 if k in higher_better else v <= 1) else "tab:red"
                                 for k, v in zip(keys, vals)])
    ax.axvline(1.0, color="black", lw=1)
    ax.set_xscale("log")
    ax.set_xlabel("deskdex / Recoll (log scale)")
    ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(outdir / "recoll-ratios.png", dpi=90)
    plt.close(fig)
    d, c = r["figures"]["deskdex"], r["figures"]["recoll"]
    panels = [("index_wall", "full index wall (s)"), ("index_cpu", "full index CPU (s)"),
              ("index_peak_rss", "peak memory of the tree (MiB)"), ("size", "size on disk (MiB)"),
              ("search_median", "search median (s)"), ("fresh_median", "freshness median (s)")]
    fig, axes = plt.subplots(2, 3, figsize=(10, 6))
    for ax, (k, title) in zip(axes.flat, panels):
        ax.bar(["deskdex", "Recoll"], [d[k] or 0, c[k] or 0], color=["tab:blue", "tab:orange"])
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(outdir / "recoll-figures.png", dpi=90)
    plt.close(fig)
    return ["recoll-ratios.png", "recoll-figures.png"]


def write(r: dict[str, Any], outdir: Path) -> None:
    d, c = r["figures"]["deskdex"], r["figures"]["recoll"]
    r["ratios"] = {k: (round(d[k] / c[k], 3) if d[k] is not None and c[k] not in (None, 0) else None)
                   for k, *_ in ROWS}
    r["targets"] = {k: {"met": ok, "detail": why} for k, (ok, why) in targets(r).items()}
    outdir.mkdir(parents=True, exist_ok=True)
    r["charts"] = charts(r, outdir)
    (outdir / "recoll-comparison.json").write_text(json.dumps(r, indent=1, default=str) + "\n")
    (outdir / "recoll-comparison.md").write_text(markdown(r))
