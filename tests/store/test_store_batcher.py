"""InsertBatcher: group commit from many coroutines."""

from __future__ import annotations

import asyncio

import pytest

from tacc_hub.store import InsertBatcher, NewTask, Store


def new(i: int) -> NewTask:
    return NewTask("ann", f"t{i}", "d", {"i": i}, {"i": i}, float(i))


class Counting:
    """Wraps a store; counts insert_tasks calls and can be told to fail."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.calls: list[int] = []
        self.fail_next = 0

    def insert_tasks(self, rows):
        self.calls.append(len(rows))
        if self.fail_next:
            self.fail_next -= 1
            raise RuntimeError("database is on fire")
        return self.store.insert_tasks(rows)


async def test_concurrent_submits_share_batches(store: Store):
    spy = Counting(store)
    async with InsertBatcher(spy) as batcher:
        recs = await asyncio.gather(*(batcher.submit(new(i)) for i in range(100)))
    assert len({r.id for r in recs}) == 100
    assert [r.name for r in recs] == [f"t{i}" for i in range(100)]  # each waiter gets its own row
    assert [r.id for r in recs] == sorted(r.id for r in recs)  # ids follow submission order
    assert sum(spy.calls) == 100 and len(spy.calls) <= 3, spy.calls
    for r in recs:
        got = store.get(r.id)
        assert got is not None and got.spec == {"i": int(r.name[1:])}
    assert store.list_tasks(limit=0)[1] == 100


async def test_batches_are_capped(store: Store):
    spy = Counting(store)
    batcher = InsertBatcher(spy, max_batch=30)
    batcher.start()
    recs = await asyncio.gather(*(batcher.submit(new(i)) for i in range(100)))
    await batcher.stop()
    assert spy.calls == [30, 30, 30, 10]
    assert len({r.id for r in recs}) == 100


async def test_a_failed_batch_fails_every_waiter_and_the_next_batch_works(store: Store):
    spy = Counting(store)
    spy.fail_next = 1
    async with InsertBatcher(spy) as batcher:
        results = await asyncio.gather(*(batcher.submit(new(i)) for i in range(20)), return_exceptions=True)
        assert len(results) == 20
        assert all(isinstance(r, RuntimeError) and "on fire" in str(r) for r in results)
        assert store.list_tasks(limit=0)[1] == 0
        rec = await batcher.submit(new(99))  # the drain coroutine survived
    assert store.get(rec.id) is not None


async def test_a_real_database_error_reaches_every_waiter(store: Store):
    store.close()  # pooled connections gone; make the next insert fail inside the database
    with store.engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE tasks")
    async with InsertBatcher(store) as batcher:
        results = await asyncio.gather(*(batcher.submit(new(i)) for i in range(10)), return_exceptions=True)
    assert all(isinstance(r, Exception) for r in results)
    assert len({id(r) for r in results}) == 1  # one failure, shared by the whole batch


async def test_stop_flushes_and_then_refuses(store: Store):
    batcher = InsertBatcher(store)
    batcher.start()
    waiters = [asyncio.ensure_future(batcher.submit(new(i))) for i in range(10)]
    await asyncio.sleep(0)  # let the submits enqueue
    await batcher.stop()
    assert all(w.done() and not w.exception() for w in waiters)
    assert store.list_tasks(limit=0)[1] == 10
    with pytest.raises(RuntimeError, match="not running"):
        await batcher.submit(new(11))


async def test_submit_before_start_is_refused(store: Store):
    with pytest.raises(RuntimeError, match="not running"):
        await InsertBatcher(store).submit(new(1))


async def test_a_cancelled_waiter_is_not_inserted(store: Store):
    spy = Counting(store)
    async with InsertBatcher(spy) as batcher:
        keep = asyncio.ensure_future(batcher.submit(new(1)))
        drop = asyncio.ensure_future(batcher.submit(new(2)))
        await asyncio.sleep(0)  # both enqueued; the drain has not run yet
        drop.cancel()
        rec = await keep
    assert drop.cancelled()
    assert spy.calls == [1]
    assert [r.name for r in store.list_tasks()[0]] == [rec.name] == ["t1"]


class Slow(Counting):
    """A store whose inserts take ``delay`` seconds in the calling thread (as a WAL checkpoint's fsync does)."""

    def __init__(self, store: Store, delay: float) -> None:
        super().__init__(store)
        self.delay = delay
        self.threads: set[str] = set()

    def insert_tasks(self, rows):
        import threading
        import time

        self.threads.add(threading.current_thread().name)
        time.sleep(self.delay)
        return super().insert_tasks(rows)


async def ticks_while(coro, every: float = 0.01) -> tuple[object, int]:
    """Run ``coro``; count how often another coroutine got the loop meanwhile."""
    count = 0
    done = False

    async def ticker():
        nonlocal count
        while not done:
            await asyncio.sleep(every)
            count += 1

    t = asyncio.ensure_future(ticker())
    try:
        result = await coro
    finally:
        done = True
        await t
    return result, count


@pytest.mark.parametrize("threaded", [False, True])
async def test_a_slow_write_stalls_the_loop_only_when_inline(store: Store, threaded: bool):
    spy = Slow(store, 0.3)
    async with InsertBatcher(spy, threaded=threaded) as batcher:
        recs, ticks = await ticks_while(asyncio.gather(*(batcher.submit(new(i)) for i in range(20))))
    assert [r.name for r in recs] == [f"t{i}" for i in range(20)]  # type: ignore[attr-defined]
    if threaded:
        assert ticks >= 10, ticks  # the loop went on serving during the 0.3 s write
        assert spy.threads and all(n.startswith("tacc-insert") for n in spy.threads)
    else:
        assert ticks <= 3, ticks  # inline: the loop waited for the write
        assert spy.threads == {"MainThread"}


async def test_threaded_batches_keep_order_one_at_a_time(store: Store):
    spy = Slow(store, 0.02)
    async with InsertBatcher(spy, threaded=True, max_batch=7) as batcher:
        first = [asyncio.ensure_future(batcher.submit(new(i))) for i in range(10)]
        await asyncio.sleep(0.005)  # the first batch is being written: these queue behind it
        later = [asyncio.ensure_future(batcher.submit(new(i))) for i in range(10, 30)]
        recs = await asyncio.gather(*first, *later)
    assert [r.name for r in recs] == [f"t{i}" for i in range(30)]
    assert [r.id for r in recs] == sorted(r.id for r in recs)
    assert max(spy.calls) <= 7 and sum(spy.calls) == 30
    assert store.list_tasks(limit=0)[1] == 30


async def test_threaded_failure_reaches_every_waiter_and_the_drain_survives(store: Store):
    spy = Counting(store)
    spy.fail_next = 1
    async with InsertBatcher(spy, threaded=True) as batcher:
        results = await asyncio.gather(*(batcher.submit(new(i)) for i in range(5)), return_exceptions=True)
        assert all(isinstance(r, RuntimeError) and "on fire" in str(r) for r in results)
        assert store.list_tasks(limit=0)[1] == 0
        rec = await batcher.submit(new(9))
    assert store.get(rec.id) is not None


async def test_threaded_stop_flushes_and_then_refuses(store: Store):
    batcher = InsertBatcher(Slow(store, 0.05), threaded=True)
    batcher.start()
    waiters = [asyncio.ensure_future(batcher.submit(new(i))) for i in range(10)]
    await asyncio.sleep(0)
    await batcher.stop()
    assert all(w.done() and not w.exception() for w in waiters)
    assert store.list_tasks(limit=0)[1] == 10
    with pytest.raises(RuntimeError, match="not running"):
        await batcher.submit(new(11))


async def test_a_drain_cancelled_during_a_threaded_write_leaves_no_waiter_hanging(store: Store):
    batcher = InsertBatcher(Slow(store, 0.2), threaded=True)
    batcher.start()
    waiters = [asyncio.ensure_future(batcher.submit(new(i))) for i in range(5)]
    await asyncio.sleep(0.05)  # the batch is in the thread
    assert batcher._task is not None
    batcher._task.cancel()  # loop shutdown
    results = await asyncio.wait_for(asyncio.gather(*waiters, return_exceptions=True), 2)
    assert all(isinstance(r, RuntimeError) and "stopped" in str(r) for r in results)
    await batcher.stop()


async def test_a_threaded_batcher_lowers_the_thread_switch_interval(store: Store):
    import sys

    from tacc_hub.store.batcher import SWITCH_INTERVAL

    before = sys.getswitchinterval()
    try:
        sys.setswitchinterval(0.005)
        async with InsertBatcher(store):
            assert sys.getswitchinterval() == 0.005  # inline: left alone
        async with InsertBatcher(store, threaded=True):
            assert sys.getswitchinterval() <= SWITCH_INTERVAL  # the loop gets the interpreter back within 1 ms
    finally:
        sys.setswitchinterval(before)
