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


def test_between_full_collections_the_young_survivors_are_frozen_every_young_interval():
    pacer = GcPacer(interval=600.0, young_interval=1.0)
    try:
        assert pacer.maybe(now=0.0)  # the full one at start
        frozen = gc.get_freeze_count()
        survivors = [[i] for i in range(5000)]  # what a burst of submissions leaves alive
        assert not pacer.maybe(now=0.5)  # not yet due
        assert gc.get_freeze_count() < frozen + len(survivors)
        assert not pacer.maybe(now=1.0)  # young collection + freeze: not a full one
        assert gc.get_freeze_count() >= frozen + len(survivors)  # they left the generations Python walks
    finally:
        gc.unfreeze()


def test_young_freezing_off_leaves_the_generations_alone():
    pacer = GcPacer(interval=600.0, young_interval=0)
    try:
        assert pacer.maybe(now=0.0)
        frozen = gc.get_freeze_count()
        survivors = [[i] for i in range(5000)]
        assert not pacer.maybe(now=10.0)
        assert gc.get_freeze_count() < frozen + len(survivors)
    finally:
        gc.unfreeze()
