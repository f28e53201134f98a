"""The report a person opens: `snakemake --report` on the smoke run, checked in headless Chromium.

Chromium is driven through its own DevTools protocol over `--remote-debugging-pipe` (JSON messages
separated by NUL on file descriptors 3 and 4): no driver, no download, and console errors arrive as events.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import REPO, run_snakemake

CHROMIUM = "/usr/bin/chromium"
# every report() output of the smoke run with the ink style (conftest.restyled_graded), by path
REPORTED = {
    "results/ladder.csv", "results/ladder.png", "results/report/ladder.html", "results/report/plan.html",
    "results/sheets/render.png", "results/sheets/A.png", "results/sheets/B.png", "results/sheets/C.png",
    "results/drift/ink.png", "results/drift/ink.regions.csv", "results/grades/ink.csv",
    "results/sheets/D.png", "results/lora/camera.loss.png",
}


def _report_calls(text: str):
    """The argument text of every report(...) call in a rule file (parentheses balanced)."""
    text = re.sub(r"#.*", "", text)  # comments may name report() too
    for m in re.finditer(r"\breport\(", text):
        depth, i = 1, m.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        yield text[m.end():i - 1]


def test_every_report_output_has_a_caption_file_that_exists():
    calls = [(path, args) for path in sorted((REPO / "rules").glob("*.smk")) for args in _report_calls(path.read_text())]
    # ladder csv + png, 2 sheets, 2 pages, drift 2, grades, lora loss, and the comparison with compare.against
    assert len(calls) == 11, [str(p) for p, _ in calls]
    for path, args in calls:
        caption = re.search(r'caption="([^"]+)"', args)
        assert caption, f"{path.name}: report() without a caption: {args}"
        assert (path.parent / caption.group(1)).resolve().is_file(), f"{path.name}: {caption.group(1)} is missing"


class Chromium:
    """Headless Chromium with the DevTools protocol on a pipe; collects console errors and exceptions."""

    FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--remote-debugging-pipe", "--window-size=1400,1000"]

    def __init__(self, profile_dir: Path, stderr=subprocess.DEVNULL):
        to_child, self._write = os.pipe()
        self._read, from_child = os.pipe()

        def fds():  # the protocol's fixed descriptors in the child (moved high first: the pipe may be 3 or 4)
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_child, from_child)]
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        self.proc = subprocess.Popen(
            [CHROMIUM, *self.FLAGS, f"--user-data-dir={profile_dir}", "about:blank"],
            preexec_fn=fds, close_fds=False, stdout=subprocess.DEVNULL, stderr=stderr,
        )
        os.close(to_child)
        os.close(from_child)
        self._buf, self._id, self.errors, self.session = b"", 0, [], None

    def _recv(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            if time.monotonic() > deadline:
                raise TimeoutError("no answer from Chromium")
            chunk = os.read(self._read, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed the pipe")
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        msg = json.loads(msg)
        params = msg.get("params", {})
        if msg.get("method") == "Runtime.exceptionThrown":
            self.errors.append(params["exceptionDetails"].get("exception", {}).get("description")
                               or params["exceptionDetails"]["text"])
        elif msg.get("method") == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
            self.errors.append(" ".join(str(a.get("value", a.get("description"))) for a in params["args"]))
        elif msg.get("method") == "Log.entryAdded" and params["entry"]["level"] == "error":
            self.errors.append(params["entry"]["text"])
        return msg

    def call(self, method: str, timeout: float = 30, **params) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params}
        if self.session:
            msg["sessionId"] = self.session
        os.write(self._write, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            answer = self._recv(deadline)
            if answer.get("id") == self._id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer.get("result", {})

    def wait_for(self, method: str, timeout: float = 30) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            msg = self._recv(deadline)
            if msg.get("method") == method:
                return msg.get("params", {})

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, url: str) -> None:
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable")
        self.call("Page.navigate", url=url)
        self.wait_for("Page.loadEventFired")

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()
        os.close(self._read)
        os.close(self._write)


def _smoke_banner_pixels(png: Path) -> int:
    """Pixels of the smoke banner's red in the top tenth of a figure."""
    from PIL import Image

    with Image.open(png) as im:
        im = im.convert("RGB")
        top = im.crop((0, 0, im.width, max(1, im.height // 10)))
        return sum(1 for r, g, b in top.get_flattened_data() if abs(r - 0xC0) < 12 and abs(g - 0x39) < 12 and abs(b - 0x2B) < 12)


def _click_result(chrome: Chromium, label: str) -> None:
    """Click the eye button of the result row labelled `label`, as a person would."""
    found = chrome.evaluate(
        "(() => { const row = [...document.querySelectorAll('tr')].find(r => r.cells[0] && "
        f"r.cells[0].textContent.trim() === {json.dumps(label)}); "
        "if (!row) return false; row.querySelector('a[iconname=eye]').click(); return true; })()"
    )
    assert found, f"no result row {label!r} in the report's navigation"
    time.sleep(0.5)


@pytest.fixture
def built_copy(restyled_graded, tmp_path):
    """A private copy of the smoke workdir with the ink style restyled, drifted and graded (the session's
    conftest.restyled_graded): report_contents then adds only the sheets, the pages and the LoRA's loss."""
    dest = tmp_path / "work"
    shutil.copytree(restyled_graded["work"], dest, symlinks=True)
    return dest


def test_smoke_report_opens_in_chromium_with_the_ladder(built_copy, restyled_graded, tmp_path):
    t0 = time.perf_counter()
    ink = f"--configfile={restyled_graded['config']}"
    shared = {rule: (built_copy / "results" / "provenance" / rule / "ink.json").read_bytes()
              for rule in ("restyle", "drift", "grades")}
    run_snakemake(built_copy, ink, "report_contents")
    # the shared sub-DAG's jobs were current: not run again
    assert {rule: (built_copy / "results" / "provenance" / rule / "ink.json").read_bytes() for rule in shared} == shared
    report = tmp_path / "report.html"
    run_snakemake(built_copy, ink, "--report", str(report), "report_contents")
    html = report.read_text()
    results = json.loads(re.search(r"var results = (\{.*?\});\n", html, re.S).group(1))
    assert set(results) == REPORTED
    assert all(r["caption"].strip() for r in results.values())
    assert "SMOKE report" in json.loads(re.search(r"var workflow_desc = (\".*?\");\n", html, re.S).group(1))
    # smoke on every figure: the red banner on each PNG, the smoke line on each page
    for path in REPORTED:
        if path.endswith(".png"):
            assert _smoke_banner_pixels(built_copy / path) > 500, f"{path} has no smoke banner"
        elif path.endswith(".html"):
            assert "SMOKE: tiny random models, not a result" in (built_copy / path).read_text(), path

    chrome = Chromium(tmp_path / "chromium-profile")
    try:
        chrome.open(report.as_uri())
        chrome.evaluate("new Promise(r => setTimeout(r, 500))")
        assert "SMOKE report" in chrome.evaluate("document.querySelector('h1.title').textContent")
        chrome.evaluate("app.showCategory('Ladder')")
        time.sleep(0.5)

        _click_result(chrome, "error vs azimuth")
        src = chrome.evaluate("document.querySelector('img[src^=\"data:image/png\"]').src")
        assert base64.b64decode(src.split("base64,", 1)[1]) == (built_copy / "results" / "ladder.png").read_bytes()
        box = chrome.evaluate("(() => { const b = document.querySelector('img[src^=\"data:image/png\"]')"
                              ".getBoundingClientRect(); return [b.x, b.y, b.width, b.height]; })()")
        shot = tmp_path / "ladder-in-report.png"
        shot.write_bytes(base64.b64decode(chrome.call("Page.captureScreenshot", format="png")["data"]))

        _click_result(chrome, "ladder table")
        frame = chrome.call("Page.getFrameTree")["frameTree"]["childFrames"][0]["frame"]["id"]
        world = chrome.call("Page.createIsolatedWorld", frameId=frame)["executionContextId"]
        rows = chrome.call("Runtime.evaluate", contextId=world, returnByValue=True,
                           expression="document.querySelectorAll('#ladder tbody tr').length")["result"]["value"]
        assert rows == len((built_copy / "results" / "ladder.csv").read_text().splitlines()) - 1
        errors = list(chrome.errors)
    finally:
        chrome.close()
    assert errors == []

    from PIL import Image

    with Image.open(shot) as im:
        figure = im.convert("RGB").crop(tuple(int(v) for v in (box[0], box[1], box[0] + box[2], box[1] + box[3])))
    assert figure.width > 300 and figure.height > 200, box
    background = max(figure.getcolors(figure.width * figure.height))[1]
    differing = sum(1 for px in figure.get_flattened_data() if px != background)
    assert differing > 0.02 * figure.width * figure.height, f"the ladder figure looks blank in {shot}"
    print(f"report test: {time.perf_counter() - t0:.1f} s")
