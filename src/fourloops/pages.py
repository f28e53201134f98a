"""Self-contained HTML pages for the report (Snakemake shows an HTML result inline; a CSV only as a download)."""

from __future__ import annotations

import csv
from html import escape
from pathlib import Path

from fourloops.figures import MARKS, SMOKE_MARK, marked
from fourloops.io import write_text

STYLE = """
body { font: 13px/1.4 system-ui, sans-serif; margin: 12px; color: #222; }
.smoke { background: #c0392b; color: #fff; font-weight: bold; padding: 4px 8px; display: inline-block; }
table { border-collapse: collapse; margin: 8px 0 16px; }
th, td { border: 1px solid #ccc; padding: 2px 6px; text-align: left; }
th { background: #eee; }
tr.floor td { background: #f4f4f4; }
td.refused { color: #c0392b; font-weight: bold; }
"""


def page(title: str, body: str, smoke) -> str:
    """`smoke`: False for a result, else the model set whose mark the page carries (True: smoke)."""
    text = MARKS.get(smoke, SMOKE_MARK) if smoke else ""
    mark = f'<p class="smoke">{escape(text)}</p>\n' if smoke else ""
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f"<style>{STYLE}</style></head>\n<body>\n{mark}<h1>{escape(title)}</h1>\n{body}</body></html>\n")


def table(head: list[str], rows: list[list], row_classes: list[str] | None = None, table_id: str = "") -> str:
    ident = f' id="{table_id}"' if table_id else ""
    out = [f"<table{ident}><thead><tr>" + "".join(f"<th>{escape(str(h))}</th>" for h in head) + "</tr></thead><tbody>"]
    for i, row in enumerate(rows):
        cls = f' class="{row_classes[i]}"' if row_classes and row_classes[i] else ""
        cells = "".join(
            f'<td class="refused">{escape(str(c))}</td>' if str(c).startswith("refused") else f"<td>{escape(str(c))}</td>"
            for c in row
        )
        out.append(f"<tr{cls}>{cells}</tr>")
    out.append("</tbody></table>\n")
    return "\n".join(out)


def ladder_page(csv_path: str | Path, out: str | Path, model_set: str) -> int:
    """The ladder table as it is in ladder.csv, every column, the floor rows shaded."""
    with open(csv_path, newline="") as fh:
        reader = csv.DictReader(fh)
        head, rows = list(reader.fieldnames or []), list(reader)
    classes = ["floor" if r["condition"] in ("floor", "floor_gt") else "" for r in rows]
    body = table(head, [[r[h] for h in head] for r in rows], classes, table_id="ladder")
    write_text(out, page(f"fourloops ladder ({model_set} model set)", body, marked(model_set)))
    return len(rows)


def _hms(seconds: float) -> str:  # not fourloops.tables.hms: a page's lineage must hold the code that writes it
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def plan_page(plan: dict, times: dict[str, tuple[float, str]], out: str | Path, model_set: str) -> dict:
    """The wall check per job group (rule and identical rows) and time and cost per machine.
    `times`: a job's output -> (seconds, where the figure came from)."""
    groups: dict[tuple, list[dict]] = {}
    for job in plan["jobs"]:
        key = (job["rule"], job["machine"], tuple(tuple(r.values()) for r in job["walls"]))
        groups.setdefault(key, []).append(job)
    parts = [f"<p>Checked against <b>{escape(plan['target'])}</b> (config machine); "
             f"{len(plan['jobs'])} jobs, {'every one fits' if plan['ok'] else 'some are refused'}.</p>\n"]
    for (rule, where, _), members in groups.items():
        outs = ", ".join(j["output"] for j in members[:4]) + (" ..." if len(members) > 4 else "")
        parts.append(f"<h2>rule {escape(rule)}, {len(members)} job(s) on {escape(where)}</h2>\n"
                     f"<p>{escape(outs)}</p>\n")
        walls = members[0]["walls"]
        parts.append(table(["wall", "asked", "available", "verdict", "source of the asked figure"],
                           [[w["wall"], w["asked"], w["available"], w["verdict"], w["source"]] for w in walls]))
    totals: dict[str, dict] = {}
    for job in plan["jobs"]:
        seconds, _ = times[job["output"]]
        t = totals.setdefault(job["machine"], {"jobs": 0, "seconds": 0.0, "cost": 0.0, "measured": 0})
        t["jobs"] += 1
        t["seconds"] += seconds
        t["cost"] += seconds / 3600.0 * job["hourly_usd"]
        t["measured"] += times[job["output"]][1].startswith("benchmark")
    parts.append("<h2>time and cost per machine</h2>\n")
    parts.append(table(["machine", "jobs", "time", "cost", "time from"],
                       [[m, t["jobs"], _hms(t["seconds"]), f"${t['cost']:.2f}",
                         f"{t['measured']} benchmark file(s), {t['jobs'] - t['measured']} forecast(s)"]
                        for m, t in sorted(totals.items())], table_id="totals"))
    parts.append("<h2>per job</h2>\n")
    parts.append(table(["rule", "output", "profile", "machine", "verdict", "time", "time from"],
                       [[j["rule"], j["output"], j["profile"], j["machine"], j["verdict"],
                         _hms(times[j["output"]][0]), times[j["output"]][1]] for j in plan["jobs"]]))
    write_text(out, page(f"walls and plan ({model_set} model set)", "".join(parts), marked(model_set)))
    return {m: {"jobs": t["jobs"], "seconds": round(t["seconds"], 1), "cost_usd": round(t["cost"], 4)}
            for m, t in totals.items()}
