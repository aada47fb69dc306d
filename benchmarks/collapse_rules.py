"""Known items (benchmarks/known_items.json) hidden by collapsing: one hit per cluster (the rule before issue 17, simulated on the
uncollapsed ranking: the first hit of each cluster stands for it) against copies only (the search as
it is now).

    .venv/bin/python benchmarks/collapse_rules.py HOME     # HOME: the corpus indexed (OCR off)
"""
import json
import subprocess
import sys

home, corpus = sys.argv[1], "/tmp/corpora/mixed/"
qs = json.load(open("benchmarks/known_items.json"))
def hits(q, *extra):
    out = subprocess.run([".venv/bin/deskdex", "--home", home, "search", "--json", "--limit", "50", *extra, "--", q["query"]],
                         capture_output=True, text=True)
    return json.loads(out.stdout)["hits"] if out.returncode == 0 else []
found = old_hidden = new_hidden = 0
for q in qs:
    targets = {corpus + t for t in q["targets"]}
    allh = hits(q, "--all")
    if not any(h["path"] in targets for h in allh):
        continue
    found += 1
    seen, shown = set(), []
    for h in allh:
        c = h.get("cluster") or 0
        if c and c in seen:
            continue
        seen.add(c)
        shown.append(h["path"])
    old_hidden += not any(p in targets for p in shown)
    new_hidden += not any(h["path"] in targets for h in hits(q))
print(f"{len(qs)} queries, {found} targets found without collapsing; hidden: one per cluster {old_hidden}, copies only {new_hidden}")
