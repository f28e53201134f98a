"""An artifact's lineage: its producing record's inputs followed by (path, sha256) to the records
that made exactly those bytes, all the way to files no record produced."""

from __future__ import annotations

from dataclasses import dataclass

from fourloops.records import ProvenanceIndex, Record, norm


@dataclass
class Lineage:
    records: list[Record]                 # the producing record first, then upstream, breadth first
    broken: list[str]                     # links whose bytes no record made (rule 5 evidence)
    via: dict[str, str]                   # record path -> the downstream record path that used it


def lineage(index: ProvenanceIndex, producer: Record) -> Lineage:
    """Walk inputs by (path, sha256) to the records that made those bytes, all the way up."""
    order, broken, via = [producer], [], {}
    seen = {producer.path}
    queue = [producer]
    while queue:
        record = queue.pop(0)
        for entry in record.entries("inputs"):
            path, sha = norm(entry["path"]), entry.get("sha256")
            upstream = index.producer(path, sha)
            if upstream is None:
                if index.producers(path):  # the workflow made this path, but not these bytes
                    broken.append(f"{record.path} used {path} (sha256 {str(sha)[:12]}), which no record made")
                continue                    # a file no rule made: the lineage ends here
            if upstream.path not in seen:
                seen.add(upstream.path)
                via[upstream.path] = record.path
                order.append(upstream)
                queue.append(upstream)
    return Lineage(order, broken, via)


def chain(lin: Lineage, record: Record) -> str:
    """'ladder <- fit[source=A] <- generate[condition=A]' for the path from the artifact to `record`."""
    by_path = {r.path: r for r in lin.records}
    steps, cur = [record.label], record.path
    while cur in lin.via:
        cur = lin.via[cur]
        steps.append(by_path[cur].label)
    return " <- ".join(reversed(steps))
