"""This run's results against another run's (config compare.against), artifact by artifact: the table as CSV and as
a page of the report. The verdicts are fourloops.compare's; the tolerances come in as a param (config/compare.yaml),
so a changed tolerance compares again."""

from __future__ import annotations

# The comparison's own outputs: not artifacts of either run
OWN = ("compare/**", "provenance/compare/**")


def compare_stage(against: str, tolerances: dict, across_machines: bool, state: str, table: str, page: str,
                  model_set: str) -> dict:
    """Compare results/ (this run, after everything the report shows) with `against`; `state` is what the other
    tree held when the DAG was built (it reruns this job when that changes), recorded as it was."""
    from html import escape

    import pandas as pd

    from fourloops import compare, pages
    from fourloops.figures import marked
    from fourloops.io import atomic_path, write_text

    rows = compare.compare_trees("results", against, compare.Tolerances.from_dict(tolerances),
                                 across_machines=across_machines, exclude=OWN)
    with atomic_path(table) as tmp:
        pd.DataFrame([r.as_dict() for r in rows], columns=list(compare.COLUMNS)).to_csv(tmp, index=False)
    counts = compare.counts(rows)
    body = (f"<p>A: this run's <code>results/</code><br>B: <code>{escape(against)}</code>"
            f"{' (another machine kind: its machine fields left out)' if across_machines else ''}</p>\n"
            f"<p>{escape(', '.join(f'{n} {v}' for v, n in counts.items()))}</p>\n"
            + pages.table(list(compare.COLUMNS), [[getattr(r, c) for c in compare.COLUMNS] for r in rows],
                          [r.verdict for r in rows], table_id="compare"))
    write_text(page, pages.page("fourloops: this run against another", body, marked(model_set)))
    return {"model_set": model_set, "against": against, "against_state": state, "verdicts": counts,
            "artifacts": len(rows)}
