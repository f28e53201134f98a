"""The pods of one run: created lazily up to a pool size, one job per pod at a time, torn down when idle,
unhealthy or at the end. How a pod is started and stopped is passed in; the pool only keeps the books."""

from __future__ import annotations

import datetime as dt
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from snakemake_interface_common.exceptions import WorkflowError


@dataclass
class Pod:
    id: str
    name: str
    created: dt.datetime
    host: str = ""
    port: int = 0
    user: str = "root"
    workspace: str = ""
    busy: bool = False
    healthy: bool = True
    last_used: float = field(default_factory=time.monotonic)
    procs: set = field(default_factory=set)  # ssh processes of running jobs (killed on teardown)
    # where its billed seconds went: (cause, t0, t1) in time.monotonic(), causes of fourloops.podbill
    t_create: float = field(default_factory=time.monotonic)
    t_end: float | None = None  # terminate sent: billing stops
    timeline: list = field(default_factory=list)
    fetching: bool = False  # weights downloads were started under the pod's fetch locks
    weights_in: set = field(default_factory=set)  # the fetch locks a job has waited out
    calls: list = field(default_factory=list)  # the executor's own calls to it: (kind ssh|rsync|rest, t0, t1)

    def spent(self, cause: str, t0: float, t1: float | None = None) -> None:
        self.timeline.append((cause, t0, time.monotonic() if t1 is None else t1))

    def called(self, kind: str, t0: float, t1: float | None = None) -> None:
        """One of the executor's own calls (an ssh, an rsync, a REST request): counted and timed for the run's
        summary, and a billed second no other cause takes is the `calls` cause's."""
        t1 = time.monotonic() if t1 is None else t1
        self.calls.append((kind, t0, t1))
        self.timeline.append(("calls", t0, t1))

    @property
    def root(self) -> str:
        return f"{self.workspace.rstrip('/')}/fourloops"

    @property
    def repo(self) -> str:
        return f"{self.root}/repo"

    @property
    def work(self) -> str:
        return f"{self.root}/work"

    @property
    def joblogs(self) -> str:
        return f"{self.root}/joblogs"


class PodPool:
    """`start(n)` returns the n-th pod of the run, ready for jobs; `stop(pod)` tears one down (verified);
    `work_left()` says whether the DAG still has jobs for a pod."""

    def __init__(self, size: int, start: Callable[[int], Pod], stop: Callable[[Pod], None],
                 work_left: Callable[[], bool], idle_teardown_s: float, close_wait_s: float,
                 log: Callable[[str], None]):
        self.size = size
        self.start = start
        self.stop = stop
        self.work_left = work_left
        self.idle_teardown_s = idle_teardown_s
        self.close_wait_s = close_wait_s
        self.log = log
        self.pods: list[Pod] = []
        self.creating = 0
        self.cond = threading.Condition()
        self.counter = 0
        self.closed = False
        self.tearing = 0  # teardowns in flight in other threads (idle / unhealthy pods)
        self.waiting: set[tuple[int, int]] = set()  # (rank, arrival) of the jobs waiting for a pod
        self.asked = 0

    def acquire(self, rank: int = 0) -> Pod:
        """A free pod for one job. Of the jobs waiting, a free pod goes to the lowest `rank` (then the first to
        ask): the executor ranks a job by when its model's weights come in, so a job never waits for weights
        while another one could run."""
        with self.cond:
            self.asked += 1
            me = (rank, self.asked)
            self.waiting.add(me)
            try:
                while True:
                    if self.closed:
                        raise WorkflowError("the run is shutting down")
                    free = [p for p in self.pods if not p.busy and p.healthy]
                    if free and me == min(self.waiting):
                        free[0].busy = True
                        return free[0]
                    if not free and len(self.pods) + self.creating < self.size:
                        self.creating += 1
                        self.counter += 1
                        n = self.counter
                        self.cond.release()
                        try:  # the new pod joins the pool free: the best-ranked waiter takes it
                            pod = self.start(n)
                        finally:
                            self.cond.acquire()
                            self.creating -= 1
                            self.cond.notify_all()
                        pod.last_used = time.monotonic()
                        self.pods.append(pod)
                        self.cond.notify_all()
                        continue
                    self.cond.wait(1.0)
            finally:
                self.waiting.discard(me)
                self.cond.notify_all()

    def release(self, pod: Pod) -> None:
        with self.cond:
            pod.busy = False
            pod.last_used = time.monotonic()
            self.cond.notify_all()
        if not pod.healthy:
            self.discard(pod)

    def discard(self, pod: Pod) -> None:
        with self.cond:
            if pod not in self.pods:
                return
            self.pods.remove(pod)
            self.tearing += 1
        try:
            self.stop(pod)
        finally:
            with self.cond:
                self.tearing -= 1
                self.cond.notify_all()

    def idle_check(self) -> None:
        limit = self.idle_teardown_s
        with self.cond:
            idle = [p for p in self.pods if not p.busy]
            if not idle or self.creating:
                return
        work_left = self.work_left()
        for pod in idle:
            if time.monotonic() - pod.last_used > limit:
                self.log(f"runpod: {pod.id} idle for more than {limit:.0f} s; tearing it down")
            elif not work_left:
                self.log(f"runpod: no pod jobs left in the DAG; tearing {pod.id} down now")
            else:
                continue
            with self.cond:
                if pod.busy:
                    continue
                pod.healthy = False  # never hand it out again
            self.discard(pod)

    def close(self) -> None:
        with self.cond:
            self.closed = True
            pods = list(self.pods)
            self.pods.clear()
            self.cond.notify_all()
        threads = [threading.Thread(target=self.stop, args=(p,)) for p in pods]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        deadline = time.monotonic() + self.close_wait_s
        with self.cond:  # never exit while another thread is still tearing a pod down
            while self.tearing and time.monotonic() < deadline:
                self.cond.wait(0.5)
