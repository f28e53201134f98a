"""What a refusal says: the artifact, the rule it broke (by number), the evidence and the fix."""

from __future__ import annotations

from dataclasses import dataclass

from fourloops.tables import format_table

RULES = {
    1: "corpus name carries a quantised-precision token",
    2: "corpus made with a quantised model",
    3: "deliverable precision not in its provenance / in its name",
    4: "made by the smoke model set or the sizing set (tiny or random weights)",
    5: "provenance missing or does not match",
    6: "out of date",
    7: "dirty git tree",
    8: "a GPU job upstream ran without the determinism settings",
}


@dataclass(frozen=True)
class Refusal:
    artifact: str
    rule: int
    evidence: str
    fix: str

    @property
    def rule_broken(self) -> str:
        return f"{self.rule} {RULES[self.rule]}"


def refusal_table(refusals: list[Refusal]) -> str:
    header = ("artifact", "rule broken", "evidence", "how to fix")
    return format_table(header, [(r.artifact, r.rule_broken, r.evidence, r.fix) for r in refusals], rule=True)
