"""The delivery spool: what never left survives any stop, what may have left is never resent."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from agent.delivery.pipeline import Pipeline
from agent.delivery.queue import BoundedQueue
from agent.delivery.shipping import Delivery
from agent.delivery.spool import SUFFIX, Recovered, Spool
from agent.delivery.spoolrecords import RESOLVED, mark_record, records
from agent.telemetry.health import HealthTracker
from agent.telemetry.metrics import Metrics
from agent.testing import RecordingTransport, sample_run_events
from tests.waits import until

ROOT = Path(__file__).resolve().parents[1]


def spool(directory: Path, max_bytes: int = 1 << 20, **options: bool) -> tuple[Spool, Recovered]:
    opened = Spool(directory, max_bytes, **options)
    return opened, opened.open()


def add(s: Spool, n: int, transports: tuple[str, ...] = ("http",), size: int = 40) -> list[int]:
    return [
        s.append(f"run-{i % 3}", "START", "app-1", b"{%d}" % i + b"x" * size, transports)
        for i in range(n)
    ]


def payloads(found: Recovered, transport: str, which: str = "waiting") -> list[bytes]:
    return [e.payload for e in getattr(found, which).get(transport, [])]


def segments(directory: Path) -> list[Path]:
    return sorted(directory.glob(f"*{SUFFIX}"))


def test_events_that_never_left_come_back_in_order_with_the_same_bytes(tmp_path: Path) -> None:
    """Appended and never sent: recovered in submit order, byte for byte."""
    s, _ = spool(tmp_path)
    add(s, 5)
    s.close()
    _, found = spool(tmp_path)
    assert payloads(found, "http") == [b"{%d}" % i + b"x" * 40 for i in range(5)]
    assert found.in_flight == {} and found.corrupt == 0


async def test_in_flight_events_come_back_as_in_flight_never_as_waiting(tmp_path: Path) -> None:
    """Marked sent and never resolved: reported in flight (to be counted unconfirmed)."""
    s, _ = spool(tmp_path)
    seqs = add(s, 4)
    await s.sending("http", seqs[:2])
    s.close()
    _, found = spool(tmp_path)
    assert [e.seq for e in found.in_flight["http"]] == seqs[:2]
    assert [e.seq for e in found.waiting["http"]] == seqs[2:]


async def test_not_sent_returns_a_batch_to_waiting(tmp_path: Path) -> None:
    """A batch that provably never left is waiting again after a restart."""
    s, _ = spool(tmp_path)
    seqs = add(s, 3)
    await s.sending("http", seqs)
    s.not_sent("http", seqs)
    s.close()
    _, found = spool(tmp_path)
    assert [e.seq for e in found.waiting["http"]] == seqs and found.in_flight == {}


async def test_resolved_events_never_come_back(tmp_path: Path) -> None:
    """An outcome on every transport that took the event ends it."""
    s, _ = spool(tmp_path)
    seqs = add(s, 3, ("http", "kafka"))
    await s.sending("http", seqs)
    s.resolved("http", seqs)
    s.resolved("kafka", seqs[:1])
    s.close()
    _, found = spool(tmp_path)
    assert "http" not in found.waiting and "http" not in found.in_flight
    assert [e.seq for e in found.waiting["kafka"]] == seqs[1:]


def test_a_recovered_spool_is_carried_into_one_fresh_segment(tmp_path: Path) -> None:
    """Opening copies what is owed into a new segment and deletes the old ones."""
    s, _ = spool(tmp_path)
    add(s, 3)
    s.close()
    first = segments(tmp_path)
    s2, _ = spool(tmp_path)
    assert segments(tmp_path) != first and len(segments(tmp_path)) == 1
    assert s2.owed == 3
    s2.close()
    _, again = spool(tmp_path)
    assert len(again.waiting["http"]) == 3


async def test_sequence_numbers_keep_growing_across_restarts(tmp_path: Path) -> None:
    """A restarted spool never reuses a sequence number of the one before."""
    s, _ = spool(tmp_path)
    old = add(s, 3)
    s.close()
    s2, _ = spool(tmp_path)
    assert min(add(s2, 1)) > max(old)


def test_a_torn_tail_is_counted_and_the_rest_kept(tmp_path: Path) -> None:
    """A record cut short by a crash is skipped; every whole record before it counts."""
    s, _ = spool(tmp_path)
    add(s, 4)
    s.close()
    (path,) = segments(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[:-7])
    _, found = spool(tmp_path)
    assert len(found.waiting["http"]) == 3 and found.corrupt == 1


def test_a_flipped_byte_skips_one_record_and_resynchronises(tmp_path: Path) -> None:
    """A corrupt record in the middle costs that record only."""
    s, _ = spool(tmp_path)
    add(s, 5)
    s.close()
    (path,) = segments(tmp_path)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    _, found = spool(tmp_path)
    assert len(found.waiting["http"]) == 4 and found.corrupt == 1


def test_garbage_files_never_stop_the_spool_from_opening(tmp_path: Path) -> None:
    """A segment of random bytes and a stray file: counted, skipped, the spool opens."""
    (tmp_path / f"{1:020d}{SUFFIX}").write_bytes(os.urandom(100_000) + b"\xa7" * 5000)
    (tmp_path / "notes.txt").write_text("not a segment")
    s, found = spool(tmp_path)
    assert found.events == 0 and found.corrupt >= 1
    add(s, 1)
    assert (tmp_path / "notes.txt").exists()


def test_room_refuses_an_event_past_the_bound(tmp_path: Path) -> None:
    """`room` is False once the bytes on disk would pass `max_bytes`."""
    s, _ = spool(tmp_path, max_bytes=64 * 1024)
    taken = 0
    while s.room(1000):
        add(s, 1, size=1000)
        taken += 1
    assert 40 < taken < 64
    assert s.size <= 64 * 1024


def test_segments_rotate_and_what_is_done_is_deleted(tmp_path: Path) -> None:
    """Segments close at their size; one whose events are all resolved goes."""
    s, _ = spool(tmp_path, max_bytes=512 * 1024)  # 64 KiB segments
    for _ in range(20):
        seqs = add(s, 50, size=1000)
        s.resolved("http", seqs)
    assert len(segments(tmp_path)) <= 2
    assert s.size < 2 * 64 * 1024 + 4096


async def test_a_long_owed_event_is_copied_forward_not_left_pinning_a_segment(
    tmp_path: Path,
) -> None:
    """One event waiting for ever keeps its bytes, not its old segment's."""
    s, _ = spool(tmp_path, max_bytes=512 * 1024)
    (stuck,) = add(s, 1, size=100)
    await s.sending("http", [stuck])
    for _ in range(20):
        s.resolved("http", add(s, 50, size=1000))
    assert len(segments(tmp_path)) <= 2
    s.close()
    _, found = spool(tmp_path)
    assert [e.seq for e in found.in_flight["http"]] == [stuck]


async def test_fsync_mode_syncs_before_a_batch_leaves(tmp_path: Path) -> None:
    """With fsync the in-flight mark is synced, off the event loop, before `sending` returns."""
    s, _ = spool(tmp_path, fsync=True)
    seqs = add(s, 2)
    await s.sending("http", seqs)
    assert not s._dirty
    s.close()


def killed_after(tmp_path: Path, steps: str, events: int = 2) -> Recovered:
    """What a spool recovers after a process ran `steps` (Python, with a spool `s` holding
    `events` events for http, numbered from 1, and an event loop `loop`) and was SIGKILLed."""
    program = textwrap.dedent(
        f"""
        import asyncio, os, signal, sys
        from pathlib import Path
        sys.path.insert(0, {str(ROOT)!r})
        from agent.delivery.spool import Spool
        s = Spool(Path({str(tmp_path)!r}), 1 << 20)
        s.open()
        for i in range({events}):
            s.append("run", "START", "app", b"event %d" % i, ["http"])
        loop = asyncio.new_event_loop()
        """
    )
    program += textwrap.dedent(steps) + "\nos.kill(os.getpid(), signal.SIGKILL)\n"
    result = subprocess.run([sys.executable, "-c", program], check=False)
    assert result.returncode == -signal.SIGKILL
    return spool(tmp_path)[1]


def test_a_killed_writer_leaves_every_appended_event(tmp_path: Path) -> None:
    """SIGKILL right after the appends: the kernel kept every record."""
    found = killed_after(tmp_path, "", events=100)
    assert payloads(found, "http") == [b"event %d" % i for i in range(100)]


def test_a_resolution_held_back_at_a_kill_leaves_the_event_in_flight(tmp_path: Path) -> None:
    """The resolution of an in-flight event is held back until the next record or `flush`:
    killed before either, the event is in flight (unconfirmed), never waiting (resent)."""
    found = killed_after(
        tmp_path, 'loop.run_until_complete(s.sending("http", [1]))\ns.resolved("http", [1])'
    )
    assert [e.seq for e in found.in_flight["http"]] == [1]
    assert [e.seq for e in found.waiting["http"]] == [2]


def test_a_resolution_of_events_never_sent_is_written_at_once(tmp_path: Path) -> None:
    """Events dropped before they left are forgotten at once: a kill cannot send them later."""
    found = killed_after(tmp_path, 's.resolved("http", [1])')
    assert [e.seq for e in found.waiting["http"]] == [2] and found.in_flight == {}


def test_held_back_resolutions_go_with_the_next_record_or_at_flush(tmp_path: Path) -> None:
    """The next in-flight mark carries the resolutions held back, and so does `flush`."""
    found = killed_after(
        tmp_path,
        """
        loop.run_until_complete(s.sending("http", [1]))
        s.resolved("http", [1])
        loop.run_until_complete(s.sending("http", [2]))
        """,
    )
    assert [e.seq for e in found.in_flight["http"]] == [2] and "http" not in found.waiting
    flushed = killed_after(
        tmp_path / "flush",
        'loop.run_until_complete(s.sending("http", [1, 2]))\ns.resolved("http", [1, 2])\ns.flush()',
    )
    assert flushed.in_flight == {} and flushed.waiting == {}


@settings(max_examples=80, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from("aSNR"), st.integers(0, 9)), max_size=60))
def test_a_stop_after_any_sequence_of_marks_recovers_exactly_what_is_owed(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, int]]
) -> None:
    """Stopped after any sequence of appends and marks, the spool gives back as waiting
    exactly what was never sent or came back, and as in flight exactly what was sent."""
    directory = tmp_path_factory.mktemp("spool")
    s, _ = spool(directory, max_bytes=256 * 1024)
    seqs: list[int] = []
    sent: set[int] = set()
    resolved: set[int] = set()
    loop = asyncio.new_event_loop()
    try:
        for op, pick in ops:
            if op == "a" or not seqs:
                seqs.extend(add(s, 1, size=pick * 1000))
                continue
            seq = seqs[pick % len(seqs)]
            if seq in resolved:
                continue
            if op == "S" and seq not in sent:
                loop.run_until_complete(s.sending("http", [seq]))
                sent.add(seq)
            elif op == "N" and seq in sent:
                s.not_sent("http", [seq])
                sent.discard(seq)
            elif op == "R":
                s.resolved("http", [seq])
                resolved.add(seq)
                sent.discard(seq)
    finally:
        loop.close()
    s.close()
    _, found = spool(directory)
    waiting = [e.seq for e in found.waiting.get("http", [])]
    assert waiting == sorted(set(seqs) - sent - resolved)
    assert [e.seq for e in found.in_flight.get("http", [])] == sorted(sent)
    assert found.corrupt == 0


def test_records_reads_back_what_it_framed() -> None:
    """The framing round-trips and a stretch of garbage is one skip."""
    one = mark_record(RESOLVED, "http", [1, 2])
    assert list(records(one + b"junk" + one)) == [
        (RESOLVED, b'["http",[1,2]]'),
        None,
        (RESOLVED, b'["http",[1,2]]'),
    ]


# -- the pipeline with a spool ---------------------------------------------------------------


def spooled_pipeline(
    directory: Path, *transports: RecordingTransport, capacity: int = 64, max_bytes: int = 1 << 20
) -> tuple[Pipeline, Metrics, Recovered]:
    """A pipeline whose deliveries share one spool in `directory`, with what it held."""
    metrics = Metrics(CollectorRegistry())
    health = HealthTracker()
    kept = Spool(directory, max_bytes)
    found = kept.open()
    pipeline = Pipeline(lambda event: orjson.dumps(event), metrics, health, kept)
    for transport in transports:
        pipeline.add(
            Delivery(
                transport,
                BoundedQueue(capacity, 2),
                batch_size=1,
                metrics=metrics,
                health=health,
                spool=kept,
            )
        )
    return pipeline, metrics, found


def counted(metrics: Metrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


def by_run(payloads: list[bytes]) -> dict[str, list[bytes]]:
    runs: dict[str, list[bytes]] = {}
    for payload in payloads:
        runs.setdefault(orjson.loads(payload)["run"]["runId"], []).append(payload)
    return runs


def balanced(pipeline: Pipeline) -> dict[str, dict[str, int]]:
    accounting = pipeline.accounting()
    for counts in accounting.values():
        resolved = counts["delivered"] + counts["dropped"] + counts["unconfirmed"]
        assert counts["offered"] == resolved + counts["queued"], accounting
    return accounting


async def stop(pipeline: Pipeline, seconds: float = 0.2) -> None:
    deadline = time.monotonic() + seconds
    for delivery in pipeline.deliveries.values():
        await delivery.drain(deadline, keep=True)
    assert pipeline.spool is not None
    pipeline.spool.close()


async def test_a_stop_keeps_what_never_left_and_the_next_start_sends_it_first(
    tmp_path: Path,
) -> None:
    """Collector down at the stop: every event is kept, not dropped; after the restart each
    leaves once, in its run's order, with the same bytes, ahead of anything new in its lane."""
    down = RecordingTransport(name="http", fail="connect")
    first, _, _ = spooled_pipeline(tmp_path, down)
    for delivery in first.deliveries.values():
        delivery.start()
    events = list(sample_run_events(20))
    for event in events:
        first.submit("app-1", event)
    await until(lambda: down.attempts >= 1)
    await stop(first)
    assert balanced(first)["http"] == {
        "offered": 20,
        "delivered": 0,
        "dropped": 0,
        "unconfirmed": 0,
        "queued": 20,
    }
    up = RecordingTransport(name="http")
    second, metrics, found = spooled_pipeline(tmp_path, up)
    second.restore(found)
    for delivery in second.deliveries.values():
        delivery.start()
    new = {**events[0], "run": {"runId": "01900000-0000-7000-8000-000000000001", "facets": {}}}
    second.submit("app-2", new)
    await until(lambda: len(up.sent) == 21)
    sent = [e.payload for e in up.sent]
    original = [orjson.dumps(e) for e in events]
    kept = [p for p in sent if p in original]
    assert sorted(kept) == sorted(original)  # every kept one, byte for byte, once
    assert by_run(kept) == by_run(original)  # each run's in its order
    assert len(sent) == 21
    assert counted(metrics, "lineage_events_restored_total", transport="http") == 20
    await stop(second)
    assert balanced(second)["http"]["delivered"] == 21
    assert Spool(tmp_path, 1 << 20).open().events == 0


async def test_in_flight_at_a_kill_is_unconfirmed_after_the_restart_never_resent(
    tmp_path: Path,
) -> None:
    """A batch marked in flight whose agent died is counted unconfirmed (interrupted)."""
    hung = RecordingTransport(name="http", delay=30)
    first, _, _ = spooled_pipeline(tmp_path, hung)
    for delivery in first.deliveries.values():
        delivery.start()
    for event in sample_run_events(3):
        first.submit("app-1", event)
    await until(lambda: hung.attempts >= 1)
    assert first.spool is not None
    first.spool.close()  # the process dies here: nothing more is written
    for delivery in first.deliveries.values():
        for worker in delivery._workers:
            worker.cancel()
    up = RecordingTransport(name="http")
    second, metrics, found = spooled_pipeline(tmp_path, up)
    flying = sum(map(len, found.in_flight.values()))
    assert 1 <= flying <= 2  # the head of each busy lane
    second.restore(found)
    for delivery in second.deliveries.values():
        delivery.start()
    await until(lambda: len(up.sent) == 3 - flying)
    assert (
        counted(metrics, "lineage_events_unconfirmed_total", transport="http", reason="interrupted")
        == flying
    )
    assert balanced(second)["http"]["offered"] == 3


async def test_a_full_spool_drops_the_newest_as_spool_full(tmp_path: Path) -> None:
    """Past `max_bytes` an event is dropped on every transport with its own reason."""
    down = RecordingTransport(name="http", fail="connect")
    pipeline, metrics, _ = spooled_pipeline(tmp_path, down, capacity=10_000, max_bytes=64 * 1024)
    for event in sample_run_events(400):
        pipeline.submit("app-1", event)
    full = counted(
        metrics, "lineage_events_dropped_by_reason_total", transport="http", reason="spool_full"
    )
    assert 0 < full < 400
    assert pipeline.spool is not None and pipeline.spool.size <= 64 * 1024
    balanced(pipeline)


async def test_events_kept_for_a_transport_no_longer_configured_are_dropped(
    tmp_path: Path,
) -> None:
    """A restart without the transport the events were kept for drops them, counted."""
    first, _, _ = spooled_pipeline(tmp_path, RecordingTransport(name="kafka", fail="connect"))
    for event in sample_run_events(4):
        first.submit("app-1", event)
    await stop(first)
    second, metrics, found = spooled_pipeline(tmp_path, RecordingTransport(name="http"))
    second.restore(found)
    assert (
        counted(
            metrics,
            "lineage_events_dropped_by_reason_total",
            transport="kafka",
            reason="transport_removed",
        )
        == 4
    )
    assert second.spool is not None and second.spool.owed == 0


async def test_a_queue_full_transport_is_not_owed_the_event(tmp_path: Path) -> None:
    """An event one transport's full queue refused is kept only for the others."""
    small = RecordingTransport(name="small", fail="connect")
    big = RecordingTransport(name="big", fail="connect")
    pipeline, _, _ = spooled_pipeline(tmp_path, small, big, capacity=5)
    pipeline.deliveries["big"].queue.resize(50)
    for event in sample_run_events(10):
        pipeline.submit("app-1", event)
    await stop(pipeline)
    found = Spool(tmp_path, 1 << 20).open()
    assert len(found.waiting["small"]) == 5 and len(found.waiting["big"]) == 10
