"""EditScore's protocol over any scorer, with no guessed value ever reaching a table.

The prompts are EditScore's own (package `editscore` 0.2: VIEScore-style semantic consistency with both
images, perceptual quality with the edited one, "10" replaced by score_range). Per pass: prompt following
and consistency are the SC scores, perceptual quality min(PQ), overall sqrt(min SC x min PQ), all on the
0-10 scale; a view's figures are the mean over num_pass. Unlike upstream (`mllm_output_to_dict` draws
`random.randint(0, score_range)` after two failed parses or on a refusal; `batch_evaluate` puts in
score_range / 2), an answer that does not parse is asked again `retries` times and then recorded as NaN
with its raw text and the reason; a view with any failed pass has NaN figures. `grade_views` asks the same
question of several views in one scorer call (grades.batch), with each view's seeds and retries as `grade_view`'s.
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

    # several (images, prompt, seed) questions in one call, an answer each in order (`grade_views` at batch > 1)
    def answer_many(self, items: list[tuple[list, str, int]]) -> list[Answer]: ...


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


def _count(grade: ViewGrade, ans: Answer) -> None:
    """One answer's attempt, seconds and tokens, added to its view's grade."""
    grade.attempts += 1
    grade.encode_seconds += ans.encode_seconds
    grade.decode_seconds += ans.decode_seconds
    grade.prompt_tokens += ans.prompt_tokens
    grade.generated_tokens += ans.generated_tokens


def _ask_views(scorer: Scorer, images: list[list], prompt: str, seeds: list[int], score_range: int, retries: int,
               grades: list[ViewGrade], batch: int) -> list[tuple[Parsed, list[str]]]:
    """One question for several views, each asked until it parses or the retries run out: each attempt asks it of
    every view still unparsed, `batch` views a scorer call (`answer` at one, `answer_many` above), view v's attempt
    k at seeds[v] + k. (the last parse, every raw answer) per view, in order."""
    texts: list[list[str]] = [[] for _ in images]
    parsed: list[Parsed | None] = [None] * len(images)
    pending = list(range(len(images)))
    for attempt in range(retries + 1):
        for start in range(0, len(pending), batch):
            views = pending[start:start + batch]
            items = [(images[v], prompt, seeds[v] + attempt) for v in views]
            answers = [scorer.answer(*items[0])] if batch == 1 else scorer.answer_many(items)
            if len(answers) != len(views):
                raise RuntimeError(f"the scorer gave {len(answers)} answers to {len(views)} questions")
            for v, ans in zip(views, answers):
                _count(grades[v], ans)
                texts[v].append(ans.text)
                parsed[v] = parse_answer(ans.text, score_range)
        pending = [v for v in pending if parsed[v].status != OK]  # only the unparsed are asked again
        if not pending:
            break
    return [(p, t) for p, t in zip(parsed, texts)]


def _take_pass(grade: ViewGrade, p: int, sc: Parsed, sc_text: list[str], pq: Parsed, pq_text: list[str],
               scale: float, failures: list, raws: list) -> None:
    """Pass p's SC and PQ parses into its view's grade: the first reasoning of each, the failures with their raw
    answers, and the pass's figures when both parsed."""
    grade.sc_reasoning, grade.pq_reasoning = grade.sc_reasoning or sc.reasoning, grade.pq_reasoning or pq.reasoning
    for name, parsed, texts in (("SC", sc, sc_text), ("PQ", pq, pq_text)):
        if parsed.status != OK:
            failures.append((name, p, parsed))
            raws += [f"{name} pass {p} attempt {k}: {t}" for k, t in enumerate(texts)]
    if sc.status == OK and pq.status == OK:
        pqv = min(pq.scores) / scale
        grade.passes.append((sc.scores[0] / scale, sc.scores[1] / scale, pqv,
                             math.sqrt(min(sc.scores) / scale * pqv)))


def _finish(grade: ViewGrade, failures: list, raws: list) -> ViewGrade:
    """A view's figures, the mean over its passes; none when any pass failed (a mean over fewer passes is another
    measure), with the reasons and the raw answers instead."""
    if failures:
        grade.parse_status = failures[0][2].status
        grade.reason = "; ".join(f"{n} pass {p}: {f.status}: {f.reason}" for n, p, f in failures)
        grade.raw = "\n".join(raws)
        return grade
    n = len(grade.passes)
    grade.prompt_following, grade.consistency, grade.perceptual_quality, grade.overall = (
        sum(v[i] for v in grade.passes) / n for i in range(4))
    return grade


def grade_view(scorer: Scorer, render, restyled, instruction: str, score_range: int, num_pass: int, seed: int,
               retries: int) -> ViewGrade:
    """EditScore's SC and PQ questions for one restyled view, num_pass times (seed + pass), one question a call."""
    return grade_views(scorer, [(render, restyled)], instruction, score_range, num_pass, [seed], retries, 1)[0]


def grade_views(scorer: Scorer, pairs: list[tuple], instruction: str, score_range: int, num_pass: int,
                seeds: list[int], retries: int, batch: int) -> list[ViewGrade]:
    """EditScore's questions for each (render, restyled) pair, view v from seeds[v], the same question asked of up
    to `batch` views a scorer call: each pass's SC question's first attempt for the views together, then its retries for only
    the views whose answer did not parse, then the PQ question alike. Each view's seeds, answers and figures are
    those of the view graded alone; at batch 1 every call is `answer`, one question."""
    batch = int(batch)
    if batch < 1:
        raise ValueError(f"grades.batch = {batch}: not a batch; allowed: a whole number >= 1")
    if len(seeds) != len(pairs):
        raise ValueError(f"{len(pairs)} views and {len(seeds)} seeds")
    sc_prompt, pq_prompt = prompts(score_range)
    sc_prompt = sc_prompt.replace("<instruction>", instruction)
    scale = score_range / 10.0
    grades = [ViewGrade() for _ in pairs]
    failures: list[list] = [[] for _ in pairs]
    raws: list[list] = [[] for _ in pairs]
    for p in range(num_pass):
        at = [int(s) + p * (retries + 1) for s in seeds]
        sc = _ask_views(scorer, [[r, s] for r, s in pairs], sc_prompt, at, score_range, retries, grades, batch)
        pq = _ask_views(scorer, [[s] for _, s in pairs], pq_prompt, at, score_range, retries, grades, batch)
        for v, grade in enumerate(grades):
            _take_pass(grade, p, *sc[v], *pq[v], scale, failures[v], raws[v])
    return [_finish(g, f, r) for g, f, r in zip(grades, failures, raws)]
