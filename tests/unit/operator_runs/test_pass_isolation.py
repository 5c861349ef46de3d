"""Every shared pass isolates a failing object (issue 47 item 3): the next objects of the
same pass are still stepped, and the failure is logged naming the object."""

from __future__ import annotations

import asyncio
import logging

import pytest

from swarmkit_operator.runs import passes


def test_a_failing_object_is_logged_and_the_pass_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    done: list[str] = []

    async def step(name: str) -> None:
        if name == "poison":
            raise ValueError("bad selector")
        done.append(name)

    with caplog.at_level(logging.WARNING):
        failed = asyncio.run(passes.each("schedules", ["a", "poison", "b"], step, str))
    assert failed == 1 and done == ["a", "b"]
    assert "schedules: poison failed (ValueError: bad selector)" in caplog.text


def test_a_cancelled_pass_stops() -> None:
    async def step(name: str) -> None:
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(passes.each("schedules", ["a"], step, str))
