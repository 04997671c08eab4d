"""The variable inspection against a real ipykernel: large and wide frames,
unprintable objects, a slow `__repr__` bounded inside the kernel, a hang only the
daemon's deadline bounds, a busy kernel (the agent's code, or a notebook's cell
run by another client), and the proof that it leaves nothing behind: no name in
the user's namespace, no execution count, no history, no events."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from jupyter_client.manager import AsyncKernelManager

from hdsp.daemon.kernels import KernelService
from hdsp.daemon.kernels.variables import InspectionLimits, is_variable_name, probe_code
from hdsp.protocol import KernelState, KernelStatus, VariableSummary
from tests.support.kernel_helpers import kernel_dir, running_service

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

SETUP = """
import numpy as np
import pandas as pd
import os, json
from collections import OrderedDict

df = pd.DataFrame({"a": np.arange(1_000_000), "b": np.arange(1_000_000) * 0.5})
df["c"] = "x"
wide = pd.DataFrame(np.zeros((3, 2000)), columns=[f"col{i}" for i in range(2000)])
arr = np.linspace(0.0, 1.0, 10_000).reshape(100, 100)
numbers = list(range(100_000))
text = "hello \\x1b[31mred\\x1b[0m"
_private = 7

class Unprintable:
    def __repr__(self):
        raise ValueError("no repr for you")

class Slow:
    def __repr__(self):
        while True:
            pass

class Sleepy:
    def __repr__(self):
        import time
        time.sleep(60)
        return "woke"

class Liar:
    @property
    def __class__(self):
        raise RuntimeError("ask type() instead")
    def __len__(self):
        raise RuntimeError("no length")

def helper():
    return 1

liar = Liar()

bad = Unprintable()
slow = Slow()
sleepy = Sleepy()
"""


def by_name(variables: list[VariableSummary]) -> dict[str, VariableSummary]:
    return {v.name: v for v in variables}


async def user_state(svc: KernelService, kernel_id: str) -> dict[str, Any]:
    """What the user's namespace holds and its history count, read by ordinary
    code (which itself counts one execution)."""
    r = await svc.execute(
        kernel_id,
        "import json as _j\nprint(_j.dumps({'names': sorted(get_ipython().user_ns), "
        "'history': len(In), 'underscore': repr(_)}))",
    )
    assert r.status == "ok", r
    import json

    state: dict[str, Any] = json.loads(r.outputs[0].text or "")
    # (IPython's own history names move with every execution, this one's too.)
    state["names"] = [n for n in state["names"] if not re.fullmatch(r"_i*\d*|_{2,3}", n)]
    state["count"] = r.execution_count
    return state


async def test_lists_frames_arrays_and_objects_bounded_and_leaves_nothing_behind(
    tmp_path: Path,
) -> None:
    limits = InspectionLimits(object_seconds=1, total_seconds=20, answer_seconds=30)
    async with running_service(inspection_limits=limits) as (svc, rec):
        info = await svc.start_kernel(cwd=str(kernel_dir(tmp_path)))
        kid = info.kernel_id
        assert (await svc.execute(kid, SETUP)).status == "ok"
        before = await user_state(svc, kid)
        events_before = len(rec.events)

        started = time.monotonic()
        found = await svc.list_variables(kid)
        elapsed = time.monotonic() - started
        assert found.listing is not None, found
        v = by_name(found.listing.variables)

        # Modules, functions, classes, IPython's names and _private are left out.
        assert set(v) == {"df", "wide", "arr", "numbers", "text", "bad", "slow", "sleepy", "liar"}
        assert (v["liar"].type, v["liar"].error) == ("Liar", "length: raised RuntimeError")
        assert v["df"].type == "pandas.DataFrame"
        assert v["df"].shape == [1_000_000, 3]
        assert [(c.name, c.dtype) for c in v["df"].columns][:2] == [
            ("a", "int64"),
            ("b", "float64"),
        ]
        assert v["df"].memory is not None and v["df"].memory >= 16_000_000
        assert v["df"].head is not None and "0.5" in v["df"].head
        assert v["wide"].shape == [3, 2000]
        assert len(v["wide"].columns) == 50 and v["wide"].columns_omitted == 1950
        assert (v["arr"].type, v["arr"].shape, v["arr"].dtype) == (
            "numpy.ndarray",
            [100, 100],
            "float64",
        )
        assert v["arr"].memory == 80_000
        assert v["numbers"].length == 100_000
        assert v["numbers"].preview is not None and len(v["numbers"].preview) <= 200
        assert v["text"].preview == repr("hello \x1b[31mred\x1b[0m")
        # A repr that raises, loops or sleeps is reported, bounded per object.
        assert v["bad"].error == "preview: raised ValueError"
        assert v["slow"].error == "preview: timed out after 1 s"
        assert v["sleepy"].error == "preview: timed out after 1 s"
        assert elapsed < 15, elapsed

        # Nothing behind: no name, no execution count, no history, `_` as it was,
        # and no event told clients the kernel worked.
        assert len(rec.events) == events_before
        after = await user_state(svc, kid)
        assert after["names"] == before["names"]
        assert after["count"] == before["count"] + 1
        assert after["history"] == before["history"] + 1
        assert after["underscore"] == before["underscore"]

        private = await svc.list_variables(kid, include_private=True)
        assert private.listing is not None
        assert "_private" in by_name(private.listing.variables)


async def test_limits_on_count_and_size(tmp_path: Path) -> None:
    limits = InspectionLimits(max_variables=5, max_bytes=100_000)
    async with running_service(inspection_limits=limits) as (svc, _):
        info = await svc.start_kernel(cwd=str(kernel_dir(tmp_path)))
        code = "\n".join(f"v{i:03d} = 'x' * 1000" for i in range(300))
        assert (await svc.execute(info.kernel_id, code)).status == "ok"
        found = await svc.list_variables(info.kernel_id)
        assert found.listing is not None
        assert [x.name for x in found.listing.variables] == [f"v{i:03d}" for i in range(5)]
        assert (found.listing.omitted, found.listing.truncated) == (295, "count")

    limits = InspectionLimits(max_bytes=3_000)
    async with running_service(inspection_limits=limits) as (svc, _):
        info = await svc.start_kernel(cwd=str(kernel_dir(tmp_path)))
        assert (await svc.execute(info.kernel_id, code)).status == "ok"
        found = await svc.list_variables(info.kernel_id)
        assert found.listing is not None
        assert found.listing.truncated == "size"
        assert 0 < len(found.listing.variables) < 20


async def test_describe_a_frame_an_array_and_an_unprintable_object(tmp_path: Path) -> None:
    async with running_service() as (svc, _):
        info = await svc.start_kernel(cwd=str(kernel_dir(tmp_path)))
        kid = info.kernel_id
        code = SETUP + "\ndf.loc[3, 'b'] = None\n"
        assert (await svc.execute(kid, code)).status == "ok"
        before = await user_state(svc, kid)

        frame = await svc.describe_variable(kid, "df")
        assert frame.detail is not None, frame
        sections = {s.title: s.text for s in frame.detail.sections}
        assert frame.detail.summary.shape == [1_000_000, 3]
        assert set(sections) >= {"dtypes", "describe()", "null counts", "head"}
        assert re.search(r"b\s+1", sections["null counts"])
        assert "mean" in sections["describe()"]

        array = await svc.describe_variable(kid, "arr")
        assert array.detail is not None
        stats = {s.title: s.text for s in array.detail.sections}["statistics"]
        assert "min: 0.0" in stats and "max: 1.0" in stats

        unprintable = await svc.describe_variable(kid, "bad")
        assert unprintable.detail is not None
        repr_section = {s.title: s.text for s in unprintable.detail.sections}["repr"]
        assert repr_section == "(raised ValueError)"

        missing = await svc.describe_variable(kid, "nothing_here")
        assert (missing.status, missing.message) == (
            "missing",
            "The kernel has no variable nothing_here.",
        )

        after = await user_state(svc, kid)
        assert after["names"] == before["names"]
        assert after["count"] == before["count"] + 1


POLARS_SETUP = """
import polars as pl
frame = pl.DataFrame({"city": ["a", "b", None] * 100_000, "n": list(range(300_000))})
wide = pl.DataFrame({f"col{i}": [0.5] for i in range(120)})
ns = frame["n"]
"""


async def test_polars_frames_and_series_with_their_columns_and_rows(tmp_path: Path) -> None:
    async with running_service() as (svc, _):
        info = await svc.start_kernel(cwd=str(kernel_dir(tmp_path)))
        kid = info.kernel_id
        assert (await svc.execute(kid, POLARS_SETUP)).status == "ok"
        found = await svc.list_variables(kid)
        assert found.listing is not None, found
        v = by_name(found.listing.variables)
        assert set(v) == {"frame", "wide", "ns"}
        frame = v["frame"]
        assert (frame.type, frame.shape) == ("polars.DataFrame", [300_000, 2])
        assert [(c.name, c.dtype) for c in frame.columns or []] == [
            ("city", "String"),
            ("n", "Int64"),
        ]
        assert frame.memory is not None and frame.memory >= 300_000 * 8
        assert frame.head is not None and "city" in frame.head and "null" in frame.head
        assert frame.error is None
        assert v["wide"].shape == [1, 120] and v["wide"].columns_omitted == 70
        series = v["ns"]
        assert (series.type, series.shape, series.dtype) == ("polars.Series", [300_000], "Int64")
        assert series.preview is not None and "0" in series.preview

        described = await svc.describe_variable(kid, "frame")
        assert described.detail is not None, described
        sections = {s.title: s.text for s in described.detail.sections}
        assert set(sections) == {"schema", "null counts", "describe()", "head"}
        assert "city: String" in sections["schema"] and "n: Int64" in sections["schema"]
        assert "100000" in sections["null counts"]  # city's nulls
        assert "mean" in sections["describe()"] and "149999.5" in sections["describe()"]
        column = await svc.describe_variable(kid, "ns")
        assert column.detail is not None
        assert {s.title for s in column.detail.sections} == {"null count", "describe()", "head"}


async def test_a_name_is_data_never_code(tmp_path: Path) -> None:
    async with running_service() as (svc, _):
        info = await svc.start_kernel(cwd=str(kernel_dir(tmp_path)))
        marker = tmp_path / "pwned"
        attacks = [
            f"x; open({str(marker)!r}, 'w')",
            f"__import__('os').system('touch {marker}')",
            "df.head()",
            "for",
            "",
        ]
        for name in attacks:
            assert not is_variable_name(name)
            found = await svc.describe_variable(info.kernel_id, name)
            assert found.status == "error" and "not a variable name" in (found.message or "")
        assert not marker.exists()
    # Whatever the request holds, the code is one fixed statement around base64.
    code = probe_code({"mode": "describe", "name": "x'); import os; os.system('id') #"})
    assert re.fullmatch(
        r"__import__\('builtins'\)\.exec\(__import__\('base64'\)\.b64decode\("
        r"'[A-Za-z0-9+/=]+'\)\.decode\('utf-8'\), \{'__name__': '__hdsp_probe__'\}\)",
        code,
    )


async def test_a_busy_kernel_is_reported_at_once_and_nothing_waits_or_is_interrupted(
    tmp_path: Path,
) -> None:
    async with running_service() as (svc, _):
        info = await svc.start_kernel(cwd=str(kernel_dir(tmp_path)))
        kid = info.kernel_id
        started = anyio.Event()

        async def on_output(ex: Any, new: Any) -> None:
            started.set()

        async with anyio.create_task_group() as tg:
            result: list[Any] = []

            async def agent_code() -> None:
                r = await svc.execute(
                    kid,
                    "import time\nprint('running', flush=True)\ntime.sleep(2)\ndone = 1",
                    on_output=on_output,
                )
                result.append(r)

            tg.start_soon(agent_code)
            await started.wait()
            t0 = time.monotonic()
            listing = await svc.list_task_variables(task_id=None, kernel_id=kid)
            assert listing.status == "busy", listing
            assert time.monotonic() - t0 < 1
        # The agent's code ran to its end, uninterrupted.
        assert result[0].status == "ok"
        found = await svc.list_variables(kid)
        assert found.listing is not None and "done" in by_name(found.listing.variables)


async def test_a_notebook_cell_running_elsewhere_makes_the_kernel_busy(
    notebook_kernel: AsyncKernelManager,
) -> None:
    km = notebook_kernel
    async with running_service() as (svc, rec):
        info = await svc.attach_kernel(km.connection_file)
        kid = info.kernel_id
        user = km.client()
        user.start_channels()
        try:
            await user.wait_for_ready(timeout=30)
            seen = len(rec.events)

            def status_since(state: KernelState) -> Any:
                return lambda e: (
                    isinstance(e, KernelStatus)
                    and e.payload == (kid, state)
                    and any(x is e for x in rec.events[seen:])
                )

            msg_id = user.execute("user_df = 1\nimport time\ntime.sleep(3)")
            await rec.wait_for(status_since(KernelState.BUSY))
            listing = await svc.list_task_variables(task_id=None, kernel_id=kid)
            assert listing.status == "busy"
            reply = await user.get_shell_msg(timeout=30)
            assert reply["parent_header"]["msg_id"] == msg_id
            assert reply["content"]["status"] == "ok"  # (not interrupted)
            await rec.wait_for(status_since(KernelState.IDLE))
            listing = await svc.list_task_variables(task_id=None, kernel_id=kid)
            assert listing.status == "ok"
            assert "user_df" in by_name(listing.variables)
        finally:
            user.stop_channels()


async def test_a_hang_the_kernel_cannot_break_is_bounded_by_the_daemon(tmp_path: Path) -> None:
    # A sum over a huge range runs in C, which checks no signals: the timer's
    # handler cannot run inside it, so only the daemon's deadline ends the wait.
    limits = InspectionLimits(object_seconds=0.5, answer_seconds=2)
    async with running_service(inspection_limits=limits) as (svc, rec):
        info = await svc.start_kernel(cwd=str(kernel_dir(tmp_path)))
        kid = info.kernel_id
        code = "class Stuck:\n    def __repr__(self):\n        return str(sum(range(10**12)))\n"
        code += "stuck = Stuck()"
        assert (await svc.execute(kid, code)).status == "ok"
        seen = len(rec.events)
        t0 = time.monotonic()
        listing = await svc.list_task_variables(task_id=None, kernel_id=kid)
        assert listing.status == "timeout", listing
        assert "nothing was interrupted" in (listing.message or "")
        assert time.monotonic() - t0 < 5
        # The kernel is left alone: not interrupted or restarted, and no event
        # told clients it worked.
        assert svc.kernel_info(kid).status is KernelState.IDLE
        assert rec.events[seen:] == []


async def test_a_task_without_a_kernel_gets_no_kernel_started() -> None:
    async with running_service() as (svc, _):
        listing = await svc.list_task_variables(task_id="t-none", kernel_id=None)
        assert listing.status == "no_kernel"
        assert svc.list_kernels() == []
