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
