#!/usr/bin/env python3
"""Connection abuse against a running `strata serve` (Scripts/abuse.sh starts it).

    abuse.py --port PORT --pid PID [--json] [--idle 10000] [--slowloris 200] [--never-read 50]
             [--bodies 200] [--seconds 15] [--hold 90]

A well-behaved client (4 kept-alive connections, one warm request every 2 ms each, in this
process) measures warm-request latency without an attack, then during each attack; each
attack runs in a child process so that its sockets do not slow the measuring loop:

  idle        IDLE connections, each answered once, then silent (kept alive)
  slowloris   SLOWLORIS connections trickling a head, one byte a second (never complete)
  never_read  NEVER_READ connections each pipelining warm requests as fast as the server takes
              them, never reading an answer
  get_bodies  BODIES connections each sending warm GETs with a 64 KiB body, in a loop

Per attack: warm p50/p99 (ms) and errors during it, the attack connections open at the start,
still open after HOLD seconds, and of those the ones idle (since their answer, for `idle`; since
their connect, else) for longer than HOLD: what the server's timeouts should have closed (late
connects, retried by the kernel while the accept queue was full, are younger). The server's
RSS before and at the attack's peak, and for `idle` the memory per idle connection
((RSS with them - RSS before) / connections). Progress goes to stderr; --json prints one object.
"""

import argparse
import asyncio
import json
import multiprocessing
import os
import sys
import time

WARM = "/images/jpeg/kite-800x500-gray.jpg?w=120&h=120&format=jpeg"


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def request(target=WARM, extra=""):
    return f"GET {target} HTTP/1.1\r\nHost: abuse\r\n{extra}\r\n".encode()


async def read_response(reader):
    """Reads one response; returns its status."""
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    await reader.readexactly(length)
    return status


class WarmClient:
    """Warm requests on a few kept-alive connections; latencies and errors."""

    def __init__(self, port, connections=4, pause=0.002):
        self.port, self.connections, self.pause = port, connections, pause
        self.latencies, self.errors, self.running = [], 0, False
        self.tasks = []

    async def start(self):
        self.running = True
        self.tasks = [asyncio.create_task(self.loop()) for _ in range(self.connections)]
        await asyncio.sleep(0.5)

    async def loop(self):
        reader = writer = None
        while self.running:
            try:
                if writer is None:
                    reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
                started = time.perf_counter()
                writer.write(request())
                status = await asyncio.wait_for(read_response(reader), 10)
                self.latencies.append(time.perf_counter() - started)
                if status != 200:
                    self.errors += 1
            except Exception:
                self.errors += 1
                writer = None
                await asyncio.sleep(0.05)
            await asyncio.sleep(self.pause)

    def take(self):
        """The latencies and errors since the last take."""
        latencies, errors = sorted(self.latencies), self.errors
        self.latencies, self.errors = [], 0
        if not latencies:
            return {"requests": 0, "errors": errors, "p50_ms": None, "p99_ms": None}
        return {
            "requests": len(latencies),
            "errors": errors,
            "p50_ms": round(latencies[len(latencies) // 2] * 1000, 3),
            "p99_ms": round(latencies[int(len(latencies) * 0.99)] * 1000, 3),
        }

    async def stop(self):
        self.running = False
        await asyncio.gather(*self.tasks, return_exceptions=True)


# The attacks: each runs in a child process, reports {"opened": n} on `ready` once its
# connections are up, then {"open_after_hold": n} after `hold` seconds.


def attack(kind, port, count, hold, ready):
    opened, closed = 0, 0
    # Per open connection: when it last made progress (connected, answered, sent a byte).
    active = {}
    done = asyncio.Event()

    async def watch(reader):
        nonlocal closed
        try:
            while await reader.read(65536):
                pass
        except Exception:
            pass
        closed += 1

    async def one(index):
        nonlocal opened
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except Exception:
            return
        opened += 1
        active[index] = time.monotonic()
        try:
            if kind == "idle":
                writer.write(request())
                await read_response(reader)
                active[index] = time.monotonic()
                await watch(reader)
            elif kind == "slowloris":
                watcher = asyncio.create_task(watch(reader))
                head = request(extra="X-Pad: " + "a" * 2000 + "\r\n")
                for byte in head:
                    if watcher.done() or done.is_set():
                        break
                    writer.write(bytes([byte]))
                    await asyncio.sleep(1)
                await watcher
            elif kind == "never_read":
                batch = request() * 512
                while not done.is_set():
                    writer.write(batch)
                    await writer.drain()
            elif kind == "get_bodies":
                body = b"b" * 65536
                watcher = None
                while not done.is_set():
                    writer.write(request(extra=f"Content-Length: {len(body)}\r\n") + body)
                    await read_response(reader)
        except Exception:
            pass
        active.pop(index, None)
        if kind in ("never_read", "get_bodies"):
            closed += 1

    async def main():
        tasks = []
        for index in range(count):
            tasks.append(asyncio.create_task(one(index)))
            if index % 200 == 199:
                await asyncio.sleep(0.05)
        await asyncio.sleep(2)
        ready.put({"opened": opened})
        await asyncio.sleep(hold)
        now = time.monotonic()
        # Open connections idle (no answer since, for `idle`; connected that long ago, else)
        # for more than `hold` seconds: what the server's timeouts should have closed.
        overdue = sum(1 for last in active.values() if now - last > hold)
        ready.put({"open_after_hold": len(active), "overdue": overdue})
        done.set()
        await asyncio.sleep(0.5)
        for task in tasks:
            task.cancel()

    asyncio.run(main())


def run_attack(kind, port, count, hold, ready):
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    attack(kind, port, count, hold, ready)


async def measure(args):
    client = WarmClient(args.port)
    await client.start()
    client.take()
    await asyncio.sleep(args.seconds)
    report = {"baseline": client.take()}
    log(f"baseline: {report['baseline']}")
    for kind, count in [
        ("idle", args.idle),
        ("slowloris", args.slowloris),
        ("never_read", args.never_read),
        ("get_bodies", args.bodies),
    ]:
        if count == 0:
            continue
        before = rss_kib(args.pid)
        ready = multiprocessing.Queue()
        process = multiprocessing.Process(target=run_attack, args=(kind, args.port, count, args.hold, ready))
        process.start()
        loop = asyncio.get_running_loop()
        started = await loop.run_in_executor(None, ready.get)
        client.take()
        peak = rss_kib(args.pid)
        with_attack = rss_kib(args.pid)
        deadline = time.monotonic() + args.seconds
        while time.monotonic() < deadline:
            await asyncio.sleep(0.5)
            peak = max(peak, rss_kib(args.pid))
        during = client.take()
        after_hold = await loop.run_in_executor(None, ready.get)
        process.join()
        entry = {
            "connections": count,
            "opened": started["opened"],
            "open_after_hold": after_hold["open_after_hold"],
            "open_longer_than_hold": after_hold["overdue"],
            "hold_s": args.hold,
            "warm": during,
            "rss_before_kib": before,
            "rss_peak_kib": peak,
        }
        if kind == "idle" and started["opened"]:
            entry["kib_per_idle_connection"] = round((with_attack - before) / started["opened"], 2)
        report[kind] = entry
        log(f"{kind}: {entry}")
        # Let the server settle (closed connections, freed memory) before the next attack.
        await asyncio.sleep(3)
    await client.stop()
    return report


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--pid", type=int, required=True)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--idle", type=int, default=10000)
    parser.add_argument("--slowloris", type=int, default=200)
    parser.add_argument("--never-read", type=int, default=50)
    parser.add_argument("--bodies", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--hold", type=float, default=90)
    args = parser.parse_args()
    report = asyncio.run(measure(args))
    if args.json:
        print(json.dumps(report))
    else:
        print(f"{'case':<12} {'conns':>6} {'open@hold':>9} {'p50 ms':>8} {'p99 ms':>8} {'errors':>6} {'RSS MiB':>8}")
        for kind, entry in report.items():
            warm = entry if kind == "baseline" else entry["warm"]
            print(
                f"{kind:<12} {entry.get('opened', ''):>6} {entry.get('open_after_hold', ''):>9} "
                f"{warm['p50_ms']:>8} {warm['p99_ms']:>8} {warm['errors']:>6} "
                f"{round(entry.get('rss_peak_kib', 0) / 1024, 1):>8}"
            )
        if "idle" in report and "kib_per_idle_connection" in report["idle"]:
            print(f"memory per idle connection: {report['idle']['kib_per_idle_connection']} KiB")


if __name__ == "__main__":
    main()
