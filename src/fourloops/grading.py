"""EditScore's protocol over any scorer, with no guessed value ever reaching a table.

The prompts are EditScore's own (package `editscore` 0.2: VIEScore-style semantic consistency with both
images, perceptual quality with the edited one, "10" replaced by score_range). Per pass: prompt following
and consistency are the SC scores, perceptual quality min(PQ), overall sqrt(min SC x min PQ), all on the
0-10 scale; a view's figures are the mean over num_pass. Unlike upstream (`mllm_output_to_dict` draws
`random.randint(0, score_range)` after two failed parses or on a refusal; `batch_evaluate` puts in
score_range / 2), an answer that does not parse is asked again `retries` times and then recorded as NaN
with its raw text and the reason; a view with any failed pass has NaN figures.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Protocol

OK, EMPTY, REFUSAL, MALFORMED, OUT_OF_RANGE, WRONG_COUNT = (
    "ok", "empty", "refusal", "malformed", "out_of_range", "wrong_count")
# Upstream treats this exact answer as a refusal; a few other openings say the same.
REFUSALS = re.compile(r"^\s*(i'?m sorry|i am sorry|i cannot|i can'?t|sorry,)", re.I)


def prompts(score_range: int) -> tuple[str, str]:
    """(SC prompt with `<instruction>` left in, PQ prompt), as EditScore builds them for `score_range`."""
    from editscore import EditScore

    es = EditScore(backbone="fourloops", score_range=int(score_range))  # no known backbone: nothing loaded
    return es.SC_prompt, es.PQ_prompt


@dataclass(frozen=True)
class Parsed:
    status: str
    scores: tuple[float, ...] = ()
    reasoning: str = ""
    reason: str = ""


def parse_answer(text: str, score_range: int, expect: int = 2) -> Parsed:
    """The {"reasoning": ..., "score": [...]} object of an answer, or a status and a reason (never a score)."""
    if text is None or not text.strip():
        return Parsed(EMPTY, reason="the scorer answered nothing")
    if REFUSALS.match(text):
        return Parsed(REFUSAL, reason=f"the scorer refused: {text.strip()[:120]!r}")
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        return Parsed(MALFORMED, reason="no JSON object in the answer")
    try:
        data = json.loads(text[start:end + 1])
    except json.JSONDecodeError as err:
        return Parsed(MALFORMED, reason=f"the answer's JSON object does not parse: {err}")
    if not isinstance(data, dict) or "score" not in data:
        return Parsed(MALFORMED, reason="the answer's JSON object has no 'score'")
    score = data["score"]
    if not isinstance(score, list) or not all(isinstance(s, (int, float)) and not isinstance(s, bool) for s in score):
        return Parsed(MALFORMED, reason=f"'score' is {score!r}, not a list of numbers")
    reasoning = data.get("reasoning", "")
    reasoning = reasoning if isinstance(reasoning, str) else json.dumps(reasoning)
    if len(score) != expect:
        return Parsed(WRONG_COUNT, reasoning=reasoning, reason=f"'score' has {len(score)} numbers, {expect} asked")
    if not all(math.isfinite(s) and 0 <= s <= score_range for s in score):
        return Parsed(OUT_OF_RANGE, reasoning=reasoning, reason=f"'score' {score} outside [0, {score_range}]")
    return Parsed(OK, tuple(float(s) for s in score), reasoning)


@dataclass
class Answer:
    text: str
    prompt_tokens: int
    generated_tokens: int
    encode_seconds: float  # prefill: the vision encoder and the prompt, up to the first generated token
    decode_seconds: float  # every later token


class Scorer(Protocol):
    def answer(self, images: list, prompt: str, seed: int) -> Answer: ...


@dataclass
class ViewGrade:
    prompt_following: float = math.nan
    consistency: float = math.nan
    perceptual_quality: float = math.nan
    overall: float = math.nan
    sc_reasoning: str = ""
    pq_reasoning: str = ""
    parse_status: str = OK
    reason: str = ""
    raw: str = ""  # the raw answers that did not parse
    attempts: int = 0
    encode_seconds: float = 0.0
    decode_seconds: float = 0.0
    prompt_tokens: int = 0
    generated_tokens: int = 0
    passes: list = field(default_factory=list)


def _ask(scorer: Scorer, images: list, prompt: str, seed: int, score_range: int, retries: int, grade: ViewGrade):
    """(the last parse, every raw answer) for one question, asked until it parses or the retries run out."""
    texts = []
    for attempt in range(retries + 1):
        ans = scorer.answer(images, prompt, seed + attempt)
        grade.attempts += 1
        grade.encode_seconds += ans.encode_seconds
        grade.decode_seconds += ans.decode_seconds
        grade.prompt_tokens += ans.prompt_tokens
        grade.generated_tokens += ans.generated_tokens
        texts.append(ans.text)
        parsed = parse_answer(ans.text, score_range)
        if parsed.status == OK:
            break
    return parsed, texts


def grade_view(scorer: Scorer, render, restyled, instruction: str, score_range: int, num_pass: int, seed: int,
               retries: int) -> ViewGrade:
    """EditScore's SC and PQ questions for one restyled view, num_pass times (seed + pass)."""
    sc_prompt, pq_prompt = prompts(score_range)
    sc_prompt = sc_prompt.replace("<instruction>", instruction)
    scale = score_range / 10.0
    grade = ViewGrade()
    failures, raws = [], []
    for p in range(num_pass):
        sc, sc_text = _ask(scorer, [render, restyled], sc_prompt, seed + p * (retries + 1), score_range, retries, grade)
        pq, pq_text = _ask(scorer, [restyled], pq_prompt, seed + p * (retries + 1), score_range, retries, grade)
        grade.sc_reasoning, grade.pq_reasoning = grade.sc_reasoning or sc.reasoning, grade.pq_reasoning or pq.reasoning
        for name, parsed, texts in (("SC", sc, sc_text), ("PQ", pq, pq_text)):
            if parsed.status != OK:
                failures.append((name, p, parsed))
                raws += [f"{name} pass {p} attempt {k}: {t}" for k, t in enumerate(texts)]
        if sc.status == OK and pq.status == OK:
            pqv = min(pq.scores) / scale
            grade.passes.append((sc.scores[0] / scale, sc.scores[1] / scale, pqv,
                                 math.sqrt(min(sc.scores) / scale * pqv)))
    if failures:  # one failed pass: no figure for the view (a mean over fewer passes is another measure)
        grade.parse_status = failures[0][2].status
        grade.reason = "; ".join(f"{n} pass {p}: {f.status}: {f.reason}" for n, p, f in failures)
        grade.raw = "\n".join(raws)
        return grade
    n = len(grade.passes)
    grade.prompt_following, grade.consistency, grade.perceptual_quality, grade.overall = (
        sum(v[i] for v in grade.passes) / n for i in range(4))
    return grade
