"""A discrete-event simulation of a continuous-batching LLM server, one step at a time.

Each step the scheduler (as vLLM's) first gives every running sequence its next token (its
next k + 1 with speculative decoding), then continues unfinished prefills in chunks, then admits
waiting requests first come first served, within ``max_batch`` sequences and
``max_tokens_per_step`` tokens. The KV cache is paged: a sequence holds ceil(positions /
block_size) blocks; a request is admitted only when the blocks of its first chunk are free, and
when a running sequence needs a block that is not there, the latest admitted sequence is
preempted (its blocks freed, its prompt and output so far computed again later). A prefix-cache
hit covers a share of each prompt: those positions take blocks but no compute. A step's time is
the :class:`~flopcount.serving.steptime.StepTime` of what it computes; the last prefill chunk of a
request yields its first token.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .steptime import StepTime, prefill_square
from .workload import Request, WorkloadError


@dataclass(frozen=True)
class Server:
    """How the server batches, and what it has."""

    step_time: StepTime
    kv_blocks: int                    # blocks of the paged cache on the server
    block_size: int = 16
    max_batch: int = 256
    max_tokens_per_step: int = 8192
    prefix_hit: float = 0.0           # share of each prompt found in the prefix cache
    draft: StepTime | None = None     # speculative decoding: the draft model's steps
    draft_tokens: int = 0             # k
    acceptance: float = 0.0           # each draft token's chance to be accepted
    seed: int = 0


@dataclass
class _Sequence:
    request: Request
    computed: int = 0                 # positions in the cache (prefix hits included)
    generated: int = 0
    blocks: int = 0
    first_token: float | None = None
    finish: float | None = None
    admitted_at: int = 0
    running: bool = False

    @property
    def target(self) -> int:
        """Positions to compute before decoding: the prompt, and after a preemption the tokens
        generated so far too (computed again)."""
        return self.request.prompt + max(0, self.generated - 1)

    @property
    def decoding(self) -> bool:
        return self.computed >= self.target and self.generated > 0


@dataclass
class Run:
    """What happened: per request (its sequence: arrival, first token, finish, lengths), per
    step (start, seconds, tokens, blocks in use, running, waiting), and the counters."""

    requests: list = field(default_factory=list)
    steps: list = field(default_factory=list)
    preemptions: int = 0
    prefill_tokens: int = 0           # prompt positions computed the first time (prefix hits not)
    recomputed_tokens: int = 0        # positions computed again after a preemption
    busy_seconds: float = 0.0
    end: float = 0.0
    area: float = 0.0                 # ∫ requests in the system dt, kept from arrivals and finishes


class _Simulation:
    def __init__(self, requests: list, server: Server):
        self.server = server
        self.rng = np.random.default_rng(server.seed)
        self.pending = sorted(requests, key=lambda r: r.arrival)
        self.arrived = 0
        self.waiting: list = []
        self.running: list = []
        self.free = server.kv_blocks
        self.admitted = 0
        self.now = 0.0
        self.run = Run()
        self._population, self._since = 0, 0.0

    def blocks_for(self, positions: int) -> int:
        return math.ceil(positions / self.server.block_size)

    def _count(self, t: float, change: int) -> None:
        self.run.area += self._population * (t - self._since)
        self._population, self._since = self._population + change, t

    def arrivals(self) -> None:
        while self.arrived < len(self.pending) and self.pending[self.arrived].arrival <= self.now:
            request = self.pending[self.arrived]
            self._count(request.arrival, +1)
            self.waiting.append(_Sequence(request))
            self.arrived += 1

    def preempt(self) -> _Sequence:
        victim = max(self.running, key=lambda s: s.admitted_at)
        self.free += victim.blocks
        victim.blocks, victim.computed, victim.running = 0, 0, False
        self.running.remove(victim)
        self.waiting.insert(0, victim)
        self.run.preemptions += 1
        return victim

    def grow(self, seq: _Sequence, positions: int) -> bool:
        """Blocks for ``positions`` of ``seq``, preempting the latest admitted; False when
        ``seq`` itself was preempted."""
        while self.blocks_for(positions) > seq.blocks:
            if self.free == 0:
                if self.preempt() is seq:
                    return False
                continue
            seq.blocks += 1
            self.free -= 1
        return True

    def chunk(self, seq: _Sequence, budget: int, work: list) -> int:
        """The next prefill chunk of ``seq`` within ``budget`` and the free blocks; tokens used."""
        room = (self.free + seq.blocks) * self.server.block_size - seq.computed
        chunk = min(budget, seq.target - seq.computed, room)
        if chunk <= 0:
            return 0
        grow = max(0, self.blocks_for(seq.computed + chunk) - seq.blocks)
        seq.blocks += grow
        self.free -= grow
        work.append((seq, chunk, 0, prefill_square(chunk, seq.computed), "prefill"))
        return chunk

    def schedule(self) -> list:
        """This step's work: [(sequence, tokens, read, square, kind)]."""
        server, budget, work = self.server, self.server.max_tokens_per_step, []
        for seq in list(self.running):            # decoding sequences first, oldest first
            if not (seq.running and seq.decoding):
                continue
            tokens = min(1 + server.draft_tokens, seq.request.output - seq.generated)
            preempted = self.run.preemptions
            if tokens > budget or not self.grow(seq, seq.computed + tokens):
                continue
            if self.run.preemptions != preempted:   # a preempted sequence's work is void
                work = [w for w in work if w[0].running]
                budget = server.max_tokens_per_step - sum(w[1] for w in work)
            # the k + 1 positions a speculative step verifies read the sequence's cache once
            work.append((seq, tokens, seq.computed + tokens, 0, "decode"))
            budget -= tokens
        for seq in self.running:                  # prefills under way
            if not seq.decoding and budget > 0:
                budget -= self.chunk(seq, budget, work)
        while self.waiting and budget > 0 and len(self.running) < server.max_batch:
            seq = self.waiting[0]
            if seq.computed == 0 and seq.generated == 0:
                seq.computed = int(server.prefix_hit * (seq.request.prompt - 1))
            first = min(budget, seq.target - seq.computed)
            if self.blocks_for(seq.computed + first) - seq.blocks > self.free:
                break
            self.waiting.pop(0)
            self.admitted += 1
            seq.admitted_at, seq.running = self.admitted, True
            self.running.append(seq)
            budget -= self.chunk(seq, budget, work)
        return work

    def step(self, work: list) -> None:
        server, run = self.server, self.run
        tokens = sum(w[1] for w in work)
        seconds = server.step_time(tokens, sum(w[2] for w in work), sum(w[3] for w in work))
        decoders = [w for w in work if w[4] == "decode"]
        prefills = [w for w in work if w[4] == "prefill"]
        if server.draft is not None and decoders:   # k draft tokens, one draft step each
            seconds += server.draft_tokens * server.draft(len(decoders), sum(w[0].computed + 1 for w in decoders))
        if server.draft is not None and prefills:   # the draft model prefills too
            seconds += server.draft(sum(w[1] for w in prefills), 0, sum(w[3] for w in prefills))
        start, self.now = self.now, self.now + seconds
        run.busy_seconds += seconds
        for seq, n, _, _, kind in work:
            if kind == "prefill":
                if seq.generated:
                    run.recomputed_tokens += n
                else:
                    run.prefill_tokens += n
                seq.computed += n
                if seq.computed >= seq.target and seq.generated == 0:
                    seq.generated, seq.first_token = 1, self.now
            else:
                accepted = min(_accepted(self.rng, server, n), seq.request.output - seq.generated)
                seq.computed += accepted
                seq.generated += accepted
            if seq.generated >= seq.request.output:
                self.finish(seq)
        run.steps.append((start, seconds, tokens, server.kv_blocks - self.free, len(self.running), len(self.waiting)))

    def finish(self, seq: _Sequence) -> None:
        seq.finish, seq.running = self.now, False
        self.free += seq.blocks
        seq.blocks = 0
        self.running.remove(seq)
        self.arrivals()                            # those that came during the step, before it ended
        self._count(self.now, -1)
        self.run.requests.append(seq)

    def __call__(self) -> Run:
        for r in self.pending:
            needed = self.blocks_for(r.prompt + r.output)
            if needed > self.server.kv_blocks:
                raise WorkloadError(f"a request of {r.prompt} + {r.output} tokens needs {needed} KV blocks; the "
                                    f"server has {self.server.kv_blocks}: shorter lengths, or more memory (--tp)")
        while self.arrived < len(self.pending) or self.waiting or self.running:
            self.arrivals()
            work = self.schedule() if (self.waiting or self.running) else []
            if not work:                           # idle, or nothing fits: until the next arrival
                if self.arrived == len(self.pending):
                    raise WorkloadError("the waiting requests' KV cache does not fit in the free blocks")
                self.now = max(self.now, self.pending[self.arrived].arrival)
                continue
            self.step(work)
        self.run.end = self.now
        self._count(self.now, 0)
        self.run.requests.sort(key=lambda s: s.request.index)
        return self.run


def simulate(requests: list, server: Server) -> Run:
    """Run ``requests`` through ``server`` until every one has finished."""
    return _Simulation(requests, server)()


def _accepted(rng: np.random.Generator, server: Server, verified: int) -> int:
    """Tokens a decode step yields: 1 without speculation; with k drafts, the accepted prefix
    plus the target's own next token."""
    if server.draft is None or verified <= 1:
        return 1
    accepted = 0
    while accepted < verified - 1 and rng.random() < server.acceptance:
        accepted += 1
    return accepted + 1
