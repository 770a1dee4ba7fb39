"""The service's process ends on stop even when a piece of work ignores its cancellation (``_abandon_leftovers``)."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_work_that_ignores_cancellation_is_named_and_left_behind() -> None:
    prog = textwrap.dedent("""
        import asyncio, logging
        from tacc_hub.service.app import TaccHub

        async def stubborn():
            while True:
                try:
                    await asyncio.sleep(3600)
                except asyncio.CancelledError:
                    pass  # swallowed, as a stuck command might

        async def well_behaved():
            await asyncio.sleep(3600)

        async def main():
            app = TaccHub()
            asyncio.create_task(stubborn())
            asyncio.create_task(well_behaved())
            await asyncio.sleep(0)
            await app._abandon_leftovers(wait=0.5)
            print("not reached: the process exits first")

        logging.basicConfig(level=logging.INFO)
        asyncio.run(main())
    """)
    out = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "not reached" not in out.stdout
    assert "1 piece(s) of work did not end when cancelled" in out.stderr and "stubborn" in out.stderr, out.stderr


def test_nothing_left_nothing_said() -> None:
    prog = textwrap.dedent("""
        import asyncio
        from tacc_hub.service.app import TaccHub

        async def main():
            asyncio.create_task(asyncio.sleep(3600))
            await TaccHub()._abandon_leftovers(wait=5)
            print("returned")

        asyncio.run(main())
    """)
    out = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "returned", out
    assert "did not end" not in out.stderr
