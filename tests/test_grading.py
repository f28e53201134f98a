"""EditScore's protocol (fourloops.grading): parsing that never guesses, and the scores' arithmetic."""

from __future__ import annotations

import math

import pytest

from fourloops import grading
from fourloops.grading import Answer, parse_answer


@pytest.mark.parametrize("text, status, scores", [
    ('{"reasoning": "fine", "score": [20, 15]}', "ok", (20.0, 15.0)),
    ('Sure.\n{\n"reasoning" : "ok",\n"score" : [25, 0]\n}\nDone', "ok", (25.0, 0.0)),
    ('{"reasoning": "x", "score": [20, 15', "malformed", ()),
    ('{"reasoning": "x"}', "malformed", ()),
    ('{"reasoning": "x", "score": ["high", 3]}', "malformed", ()),
    ('score: 7 out of 10', "malformed", ()),
    ('{"reasoning": "x", "score": [26, 3]}', "out_of_range", ()),
    ('{"reasoning": "x", "score": [-1, 3]}', "out_of_range", ()),
    ('{"reasoning": "x", "score": [3]}', "wrong_count", ()),
    ("I'm sorry, but I can't assist with that request.", "refusal", ()),
    ("", "empty", ()),
    ("   \n", "empty", ()),
])
def test_an_answer_parses_or_says_why_never_a_guess(text, status, scores):
    got = parse_answer(text, score_range=25)
    assert (got.status, got.scores) == (status, scores)
    assert (got.reason == "") == (status == "ok")


def test_the_prompts_are_editscores_with_the_score_range():
    sc, pq = grading.prompts(25)
    assert "<instruction>" in sc and "From scale 0 to 25" in sc and "From scale 0 to 25" in pq
    assert "scale 0 to 10" not in sc + pq


class Canned:
    """A scorer that answers from a list, cycling; records what it was asked."""

    def __init__(self, *answers):
        self.answers, self.asked = list(answers), []

    def answer(self, images, prompt, seed):
        self.asked.append((len(images), seed))
        return Answer(self.answers[(len(self.asked) - 1) % len(self.answers)], 100, 10, 0.5, 0.25)


def test_scores_are_editscores_arithmetic_on_the_0_to_10_scale():
    scorer = Canned('{"reasoning": "sc", "score": [20, 10]}', '{"reasoning": "pq", "score": [15, 25]}')
    g = grading.grade_view(scorer, "render", "restyled", "ink", score_range=25, num_pass=1, seed=42, retries=1)
    assert g.parse_status == "ok" and g.reason == ""
    assert (g.prompt_following, g.consistency, g.perceptual_quality) == pytest.approx((8.0, 4.0, 6.0))
    assert g.overall == pytest.approx(math.sqrt(4.0 * 6.0))  # sqrt(min SC x min PQ)
    assert scorer.asked == [(2, 42), (1, 42)]  # SC sees both images, PQ the restyled one
    assert (g.encode_seconds, g.decode_seconds, g.prompt_tokens, g.generated_tokens) == (1.0, 0.5, 200, 20)


def test_a_scorer_that_answers_garbage_gets_nan_with_the_raw_text_and_the_reason():
    scorer = Canned("lorem ipsum", "I'm sorry, I cannot rate this.", "", '{"score": [99, 99]}')
    g = grading.grade_view(scorer, "render", "restyled", "ink", score_range=25, num_pass=2, seed=1, retries=1)
    assert all(math.isnan(v) for v in (g.prompt_following, g.consistency, g.perceptual_quality, g.overall))
    assert g.parse_status != "ok" and "SC pass 0" in g.reason and "PQ pass 1" in g.reason
    assert "lorem ipsum" in g.raw
    assert g.attempts == 2 * 2 * 2  # two passes, two questions, one retry each


def test_a_retry_that_parses_is_used_and_one_failed_pass_leaves_no_figure():
    ok = '{"reasoning": "r", "score": [10, 10]}'
    g = grading.grade_view(Canned("junk", ok, ok), "a", "b", "ink", score_range=10, num_pass=1, seed=0, retries=1)
    assert g.parse_status == "ok" and g.prompt_following == 10.0 and g.attempts == 3
    g = grading.grade_view(Canned(ok, ok, "junk", "junk", ok), "a", "b", "ink", score_range=10, num_pass=2, seed=0,
                           retries=1)
    assert math.isnan(g.overall) and g.parse_status == "malformed"


# ----------------------------------------------------------------------------- several views a call (grades.batch)
class Views:
    """A stand-in scorer whose answer follows from the view (the last image's name), the question (SC: two images,
    PQ: one) and the seed; a view in `junk` answers junk to its first junk[view] askings of each question. Records
    every call: ("one" or "many", [(view, question, seed), ...])."""

    def __init__(self, junk: dict):
        self.junk, self.asked, self.calls = dict(junk), {}, []

    def _reply(self, images, prompt, seed):
        view, question = images[-1], "SC" if len(images) == 2 else "PQ"
        n = self.asked[(view, question)] = self.asked.get((view, question), 0) + 1
        if n <= self.junk.get(view, 0):
            text = f"junk from {view}"
        else:
            text = f'{{"reasoning": "{view} {question} {seed}", "score": [{seed % 20}, {(seed * 7) % 25}]}}'
        return (view, question, seed), Answer(text, len(prompt) + len(images), seed % 5 + 1, 0.5, 0.25)

    def answer(self, images, prompt, seed):
        asked, ans = self._reply(images, prompt, seed)
        self.calls.append(("one", [asked]))
        return ans

    def answer_many(self, items):
        replies = [self._reply(*item) for item in items]
        self.calls.append(("many", [asked for asked, _ in replies]))
        return [ans for _, ans in replies]


def _fields(g) -> dict:
    """A view's grade as comparable values (NaN is not equal to itself)."""
    import dataclasses

    return {k: ("nan" if isinstance(v, float) and math.isnan(v) else v) for k, v in dataclasses.asdict(g).items()}


def test_views_graded_one_a_call_through_the_batched_path_are_the_one_view_grades():
    """At batch 1 grade_views asks every question with `answer`, one view a call, with grade_view's seeds: each view's
    grade is grade_view's, field for field (a retried answer, a failed pass and a clean view among them)."""
    pairs = [(f"render{i}", f"view{i}") for i in range(4)]
    seeds = [42 + i * 2 * 2 for i in range(4)]  # the stage's: seed + view x passes x attempts
    junk = {"view1": 1, "view2": 2}  # view1: its first SC and PQ retried; view2: pass 0 fails, pass 1 parses
    alone = Views(junk)
    expected = [grading.grade_view(alone, r, v, "ink", 25, 2, s, 1) for (r, v), s in zip(pairs, seeds)]
    together = Views(junk)
    got = grading.grade_views(together, pairs, "ink", 25, 2, seeds, 1, batch=1)
    assert [_fields(g) for g in got] == [_fields(g) for g in expected]
    assert [g.parse_status for g in got] == ["ok", "ok", "malformed", "ok"] and got[1].attempts == 6
    assert {kind for kind, _ in together.calls} == {"one"}
    assert sorted(a for _, asked in together.calls for a in asked) == sorted(a for _, asked in alone.calls for a in asked)


def test_a_batch_asks_each_questions_first_attempt_together_then_retries_only_the_views_that_did_not_parse():
    """Five views at three a call, two retries: each question's first attempt goes to the views three and two a
    call, the retries to the unparsed views only, together, each at its own seed + attempt; the grades are the
    one-view-a-call grades."""
    pairs = [(f"render{i}", f"view{i}") for i in range(5)]
    seeds = [100 + 3 * i for i in range(5)]  # one pass, three attempts each
    junk = {"view1": 1, "view4": 2}
    scorer = Views(junk)
    got = grading.grade_views(scorer, pairs, "ink", 25, 1, seeds, 2, batch=3)
    sc = lambda v, k: (f"view{v}", "SC", seeds[v] + k)  # noqa: E731
    pq = lambda v, k: (f"view{v}", "PQ", seeds[v] + k)  # noqa: E731
    assert scorer.calls == [
        ("many", [sc(0, 0), sc(1, 0), sc(2, 0)]), ("many", [sc(3, 0), sc(4, 0)]),  # the first attempts
        ("many", [sc(1, 1), sc(4, 1)]),  # the retries of view1 and view4 only
        ("many", [sc(4, 2)]),  # view4's second retry
        ("many", [pq(0, 0), pq(1, 0), pq(2, 0)]), ("many", [pq(3, 0), pq(4, 0)]),
        ("many", [pq(1, 1), pq(4, 1)]), ("many", [pq(4, 2)]),
    ]
    alone = Views(junk)
    expected = [grading.grade_view(alone, r, v, "ink", 25, 1, s, 2) for (r, v), s in zip(pairs, seeds)]
    assert [_fields(g) for g in got] == [_fields(g) for g in expected]
    assert [g.attempts for g in got] == [2, 4, 2, 2, 6] and all(g.parse_status == "ok" for g in got)
    with pytest.raises(ValueError, match=r"grades.batch = 0: not a batch"):
        grading.grade_views(scorer, pairs, "ink", 25, 1, seeds, 2, batch=0)
