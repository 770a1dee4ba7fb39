"""The service's garbage-collection pacing: full collections at chosen moments, between passes."""

from __future__ import annotations

import gc

from tacc_hub.service.gcpause import GcPacer


def test_pacer_collects_and_freezes_at_start_then_once_per_interval():
    pacer = GcPacer(interval=600.0)
    try:
        junk = [[i] for i in range(1000)]
        assert pacer.maybe(now=0.0)
        assert gc.get_freeze_count() >= len(junk)  # the survivors left the collector's generations
        assert not pacer.maybe(now=599.0)
        assert pacer.maybe(now=600.0)
        assert not GcPacer(interval=0).maybe(now=1e9)  # 0: never
    finally:
        gc.unfreeze()
