"""Overload benchmark: N fake machines reporting like agents, at a given total rate, with and
without shedding.

    .venv/bin/python benchmarks/overload_bench.py --find                 # the sustainable rate
    .venv/bin/python benchmarks/overload_bench.py --rates 400,800 --delay 0,0.25

Each machine behaves as an agent does (`agent/runtime/loop.py`): one report at a time, the next
one report interval (`machines / rate` seconds) after the reply; after a 503 or 429 it waits
what `Retry-After` says plus the agent's jitter (`retry_delay`), after a timeout or a refused
connection the agent's backoff (`backoff_delay`). A report waits at most 30 s, the agent's own
timeout. Machines start at random points of their interval. For each rate and
`max_report_delay_seconds` (0: no shedding, as before issue 25) it prints the accepted reports'
p50 and p99, the reports shed (503) and how fast they were answered, the timeouts and other
errors, and the most machines Down at once (sampled every second from `/metrics`, with the
default 30 s `down_after_seconds`). Every figure is the median of `--repeat` runs (three by
default), each on a fresh coordinator process, printed with the load average.

`--find` raises the rate without shedding until the accepted p99 passes 1 s or a report times
out: the last rate before that is the sustainable rate. The coordinator and this script share
the machine, so the figures include the load generator's cost (bodies are serialised once).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field

import aiohttp
from coordinator_bench import machine
from coordinator_rig import Cluster, Coordinator, load, machine_report, percentile

from astraeus.agent.runtime.client import retry_after
from astraeus.agent.runtime.loop import backoff_delay, retry_delay

TIMEOUT_SECONDS = 30.0
"""The agent's own timeout for a report (`agent/runtime/client.py`)."""


@dataclass
class Outcome:
    """One run at one rate."""

    rate: float
    delay: float
    seconds: float
    latencies: list[float] = field(default_factory=list)
    """Accepted reports (200), seconds."""
    refused: list[float] = field(default_factory=list)
    """Shed reports (503), seconds to the answer."""
    counts: Counter[str] = field(default_factory=Counter)
    down: int = 0
    """The most machines Down at once."""

    @property
    def p99(self) -> float:
        return percentile(self.latencies, 0.99)

    def line(self) -> str:
        c = self.counts
        return (
            f"    {self.rate:.0f}/s nominal, shedding past {self.delay:g} s:"
            f" {len(self.latencies) / self.seconds:.0f}/s accepted, p50"
            f" {percentile(self.latencies, 0.5) * 1000:.0f} ms, p99 {self.p99 * 1000:.0f} ms;"
            f" shed {c['503']} (answered in p99 {percentile(self.refused, 0.99) * 1000:.0f} ms),"
            f" 429 {c['429']}, timeouts {c['timeout']}, other errors {c['error']};"
            f" machines Down at most {self.down} ({load()})"
        )


async def _machine(
    http: aiohttp.ClientSession,
    c: Coordinator,
    name: str,
    interval: float,
    out: Outcome,
    window: tuple[float, float],
    rng: random.Random,
) -> None:
    """One fake machine's reports until `window` ends; those sent inside it are counted."""
    url = f"{c.base}/api/v1/machines/{name}/report"
    headers = {
        "Authorization": f"Bearer {c.cluster.agents[name]}",
        "Content-Type": "application/json",
    }
    body = json.dumps({"report": machine_report(name)}).encode()
    failures = 0
    await asyncio.sleep(rng.random() * interval)
    while (started := time.perf_counter()) < window[1]:
        counted = started >= window[0]
        try:
            async with http.put(url, data=body, headers=headers) as response:
                await response.read()
                status, after = response.status, retry_after(response.headers.get("Retry-After"))
        except TimeoutError:
            status, after = 0, None
            kind = "timeout"
        except aiohttp.ClientError:
            status, after = 0, None
            kind = "error"
        else:
            kind = {200: "", 429: "429", 503: "503"}.get(status, "error")
        took = time.perf_counter() - started
        if not kind:
            failures, wait = 0, interval
            if counted:
                out.latencies.append(took)
        else:
            # As the agent: its backoff, and no sooner than Retry-After (plus jitter).
            failures += 1
            wait = backoff_delay(failures, 1.0, 5.0, rng.random)
            if after is not None:
                wait = max(wait, retry_delay(after, rng.random))
            if counted:
                out.counts[kind] += 1
                if status == 503:
                    out.refused.append(took)
        await asyncio.sleep(max(0.0, wait - took))


async def _down(c: Coordinator, stop: asyncio.Event, out: Outcome) -> None:
    while not stop.is_set():
        try:
            down = await c.metric('astraeus_machines{state="Down"}')
        except (aiohttp.ClientError, TimeoutError):
            down = 0.0  # the scrape itself waited too long: no figure this second
        out.down = max(out.down, int(down))
        await asyncio.sleep(1.0)


async def once(
    cluster: Cluster, rate: float, delay: float, seconds: float, warmup: float
) -> Outcome:
    """Every machine reports, one `machines / rate` interval apart, for `warmup` + `seconds`;
    only reports sent after the warm-up count."""
    names = list(cluster.agents)
    interval = len(names) / rate
    env = {
        "ASTRAEUS_MAX_REPORT_DELAY_SECONDS": str(delay),
        "ASTRAEUS_DOWN_AFTER_SECONDS": "30",
        "ASTRAEUS_LOST_AFTER_SECONDS": "60",
        "ASTRAEUS_REPORT_INTERVAL_SECONDS": str(interval),
    }
    out = Outcome(rate, delay, seconds)
    rng = random.Random(7)  # noqa: S311 - spreading start times, not a secret
    async with Coordinator(cluster, **env) as c:
        timeout = aiohttp.ClientTimeout(total=TIMEOUT_SECONDS)
        connector = aiohttp.TCPConnector(limit=len(names))
        async with aiohttp.ClientSession(timeout=timeout, connector=connector) as http:
            stop = asyncio.Event()
            sampler = asyncio.create_task(_down(c, stop, out))
            now = time.perf_counter()
            window = (now + warmup, now + warmup + seconds)
            await asyncio.gather(
                *(_machine(http, c, name, interval, out, window, rng) for name in names)
            )
            stop.set()
            await sampler
    print(out.line(), flush=True)
    return out


def _median(outcomes: list[Outcome]) -> str:
    def med(values: list[float]) -> float:
        return statistics.median(values)

    p99 = med([o.p99 * 1000 for o in outcomes])
    accepted = med([len(o.latencies) / o.seconds for o in outcomes])
    shed = med([o.counts["503"] for o in outcomes])
    timeouts = med([o.counts["timeout"] for o in outcomes])
    down = med([o.down for o in outcomes])
    spread = ", ".join(f"{o.p99 * 1000:.0f}" for o in outcomes)
    return (
        f"median of {len(outcomes)}: accepted {accepted:.0f}/s, p99 {p99:.0f} ms of [{spread}],"
        f" shed {shed:.0f}, timeouts {timeouts:.0f}, machines Down at most {down:.0f}"
    )


async def main_async(args: argparse.Namespace) -> None:
    cluster = Cluster(args.machines)
    try:
        if args.find:
            rate, last_ok = args.start, 0.0
            while rate <= args.highest:
                found = await once(cluster, rate, 0.0, args.seconds, args.warmup)
                if found.p99 > 1.0 or found.counts["timeout"]:
                    break
                last_ok, rate = rate, rate + args.step
            print(f"sustainable without shedding: {last_ok:.0f}/s ({load()})", flush=True)
            return
        for rate in (float(r) for r in args.rates.split(",")):
            for delay in (float(d) for d in args.delay.split(",")):
                print(f"== {rate:.0f} reports/s from {args.machines} machines, shedding past"
                      f" {delay:g} s", flush=True)  # fmt: skip
                outcomes = [
                    await once(cluster, rate, delay, args.seconds, args.warmup)
                    for _ in range(args.repeat)
                ]
                print(f"  {_median(outcomes)} ({load()})", flush=True)
    finally:
        cluster.remove()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--machines", type=int, default=1000)
    parser.add_argument("--rates", default="300,600", help="reports per second, comma-separated")
    parser.add_argument("--delay", default="0,0.25", help="max_report_delay_seconds values")
    parser.add_argument("--seconds", type=float, default=20.0, help="measured, per run")
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--find", action="store_true", help="find the sustainable rate")
    parser.add_argument("--start", type=float, default=100.0)
    parser.add_argument("--step", type=float, default=50.0)
    parser.add_argument("--highest", type=float, default=2000.0)
    parser.add_argument(
        "--smoke", action="store_true", help="a tiny size: that it runs (the suite's smoke test)"
    )
    args = parser.parse_args()
    if args.smoke:
        args.machines, args.rates, args.delay, args.repeat = 20, "20", "0", 1
        args.seconds, args.warmup, args.find = 2.0, 0.5, False
    print(machine(), flush=True)
    asyncio.run(main_async(args))
    print(f"done ({load()})")


if __name__ == "__main__":
    main()
