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
