"""One Kafka client alone, in a process of its own, the way the agent's transport uses it:
each record awaited until acknowledged, from asyncio.

    python -m tests.bench.kafka_clients confluent|aiokafka BOOTSTRAP TOPIC RECORDS LANES

Prints one JSON line: the latency of `LATENCY_RECORDS` records sent one at a time (p50, p99),
the rate of `RECORDS` records over `LANES` concurrent senders (each awaits its record before
the next, as a lane of the transport does), the process's CPU time per record (the client's
own threads included) and how much the resident memory grew from before the client was
imported. Both clients get the same settings: acks all, no idempotence, linger 1 ms.
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

LATENCY_RECORDS = 300
PAYLOAD = b"x" * 1400  # the size of a canonical sample RunEvent

Send = Callable[[bytes], Awaitable[None]]


def _rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


async def _confluent(bootstrap: str, topic: str) -> tuple[Send, Callable[[], Any]]:
    import threading

    import confluent_kafka

    loop = asyncio.get_running_loop()
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": False,
            "message.send.max.retries": 0,
            "acks": "all",
            "linger.ms": 1,
        }
    )
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            producer.poll(0.05)

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()

    async def send(key: bytes) -> None:
        report: asyncio.Future[Any] = loop.create_future()

        def done(error: Any, _message: Any) -> None:
            loop.call_soon_threadsafe(report.set_result, error)

        producer.produce(topic, PAYLOAD, key, on_delivery=done)
        error = await report
        if error is not None:
            raise RuntimeError(str(error))

    def close() -> None:
        stop.set()
        thread.join()
        producer.flush(5)

    return send, close


async def _aiokafka(bootstrap: str, topic: str) -> tuple[Send, Callable[[], Any]]:
    import aiokafka  # type: ignore[import-untyped]  # ships no type information

    producer = aiokafka.AIOKafkaProducer(
        bootstrap_servers=bootstrap, enable_idempotence=False, acks="all", linger_ms=1
    )
    await producer.start()

    async def send(key: bytes) -> None:
        await (await producer.send(topic, PAYLOAD, key=key))

    return send, producer.stop


async def measure(
    kind: str, bootstrap: str, topic: str, records: int, lanes: int
) -> dict[str, Any]:
    before = _rss_mib()
    send, close = await (_confluent if kind == "confluent" else _aiokafka)(bootstrap, topic)
    await send(b"warm-up")
    latencies = []
    for index in range(LATENCY_RECORDS):
        began = time.perf_counter()
        await send(b"run-%d" % (index % 7))
        latencies.append(time.perf_counter() - began)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime

    async def lane(number: int) -> None:
        for _ in range(records // lanes):
            await send(b"run-%d" % number)

    began = time.perf_counter()
    await asyncio.gather(*(lane(number) for number in range(lanes)))
    seconds = time.perf_counter() - began
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime - cpu
    grown = _rss_mib() - before
    done = close()
    if asyncio.iscoroutine(done):
        await done
    latencies.sort()
    sent = records // lanes * lanes
    return {
        "client": kind,
        "p50_ms": round(latencies[len(latencies) // 2] * 1000, 3),
        "p99_ms": round(latencies[int(len(latencies) * 0.99)] * 1000, 3),
        "records_per_second": round(sent / seconds, 1),
        "cpu_us_per_record": round(cpu / sent * 1e6, 1),
        "rss_growth_mib": round(grown, 1),
    }


def main() -> None:
    kind, bootstrap, topic, records, lanes = sys.argv[1:6]
    print(json.dumps(asyncio.run(measure(kind, bootstrap, topic, int(records), int(lanes)))))


if __name__ == "__main__":
    main()
