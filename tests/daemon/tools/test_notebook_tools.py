"""Notebook tools on real files with a real kernel: round trips that keep the
notebook valid, run_cell writing outputs back, a notebook changed on disk left
alone, paths kept inside the workspace; and a peer check of hdsp's outputs
against nbclient's for the same notebooks."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import nbformat
import pytest

from hdsp.daemon.conversation import ImageBlock, TextBlock
from hdsp.daemon.tools import ToolError
from hdsp.daemon.tools.kernel_output import strip_ansi
from hdsp.daemon.tools.notebook_tools import (
    DeleteCell,
    EditCell,
    InsertCell,
    NotebookTracker,
    ReadNotebook,
    RunCell,
    notebook_output,
)
from tests.daemon.tools.nbclient_runs import run_with_nbclient
from tests.support.daemon_process import short_tmp_dir
from tests.support.kernel_helpers import running_service, tiny_png
from tests.support.tool_context import RecordingContext

pytestmark = pytest.mark.timeout(60)

_nbf: Any = nbformat
_v4: Any = nbformat.v4


def _read(path: Path) -> Any:
    nb = _nbf.read(str(path), as_version=4)
    _nbf.validate(nb)  # raises when the file is not a valid notebook
    return nb


def _old_notebook(path: Path) -> None:
    """A notebook as older Jupyter wrote it: nbformat 4.4, no cell ids."""
    path.write_text(
        json.dumps(
            {
                "nbformat": 4,
                "nbformat_minor": 4,
                "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3"}},
                "cells": [
                    {"cell_type": "markdown", "metadata": {}, "source": ["# Title\n", "Intro"]},
                    {
                        "cell_type": "code",
                        "metadata": {"tags": ["keep"]},
                        "execution_count": 3,
                        "source": "print('old')",
                        "outputs": [{"output_type": "stream", "name": "stdout", "text": "old\n"}],
                    },
                ],
            }
        )
    )


class Tools:
    def __init__(self) -> None:
        tracker = NotebookTracker()
        self.read = ReadNotebook(tracker)
        self.insert = InsertCell(tracker)
        self.edit = EditCell(tracker)
        self.delete = DeleteCell(tracker)
        self.run = RunCell(tracker)


def _text(result: Any) -> str:
    block = result.content[0]
    assert isinstance(block, TextBlock)
    return block.text


async def test_read_insert_edit_delete_keep_the_notebook_valid(tmp_path: Path) -> None:
    path = tmp_path / "analysis.ipynb"
    _old_notebook(path)
    os.chmod(path, 0o640)
    tools, ctx = Tools(), RecordingContext(tmp_path)

    outline = _text(await tools.read.execute(ctx, {"path": "analysis.ipynb"}))
    assert outline.startswith("analysis.ipynb: 2 cells, kernelspec python3")
    assert "## Cell 0 [markdown]\n# Title\nIntro" in outline
    assert "## Cell 1 [code] (execution_count 3)\nprint('old')" in outline
    assert "  - stdout: 1 line(s): old" in outline

    done = await tools.insert.execute(
        ctx, {"path": "analysis.ipynb", "index": 1, "source": "x = 1", "cell_type": "code"}
    )
    assert _text(done) == "Inserted a code cell at index 1 of analysis.ipynb (now 3 cells)."
    nb = _read(path)
    assert nb.nbformat_minor >= 5 and all(c.get("id") for c in nb.cells)
    assert [c.source for c in nb.cells] == ["# Title\nIntro", "x = 1", "print('old')"]

    await tools.edit.execute(ctx, {"path": "analysis.ipynb", "index": 2, "source": "print('new')"})
    nb = _read(path)
    edited = nb.cells[2]
    assert (edited.source, edited.outputs, edited.execution_count) == ("print('new')", [], None)
    # Metadata stays (with the agent's mark added), stale outputs go.
    assert edited.metadata["tags"] == ["keep"]
    assert edited.metadata["hdsp"]["editedBy"] == "agent"
    assert edited.metadata["hdsp"]["task"] == ctx.task_id

    await tools.edit.execute(
        ctx, {"path": "analysis.ipynb", "index": 1, "source": "*note*", "cell_type": "markdown"}
    )
    await tools.delete.execute(ctx, {"path": "analysis.ipynb", "index": 0})
    await tools.insert.execute(ctx, {"path": "analysis.ipynb", "source": "# end"})
    nb = _read(path)
    assert [(c.cell_type, c.source) for c in nb.cells] == [
        ("markdown", "*note*"),
        ("code", "print('new')"),
        ("code", "# end"),
    ]
    assert len({c.id for c in nb.cells}) == 3
    # Atomic writes leave no temporary files behind and keep the file's mode.
    assert sorted(os.listdir(tmp_path)) == ["analysis.ipynb"]
    assert os.stat(path).st_mode & 0o777 == 0o640

    with pytest.raises(ToolError, match="no cell 7: the notebook has 3 cells"):
        await tools.delete.execute(ctx, {"path": "analysis.ipynb", "index": 7})
    with pytest.raises(ToolError, match="past the end"):
        await tools.insert.execute(ctx, {"path": "analysis.ipynb", "index": 9, "source": ""})

    created = await tools.insert.execute(
        ctx, {"path": "new.ipynb", "source": "# A new notebook", "cell_type": "markdown"}
    )
    assert _text(created).startswith("Created the notebook with a markdown cell at index 0")
    assert [c.source for c in _read(tmp_path / "new.ipynb").cells] == ["# A new notebook"]


async def test_a_notebook_changed_on_disk_is_not_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "shared.ipynb"
    _old_notebook(path)
    tools, ctx = Tools(), RecordingContext(tmp_path)
    with pytest.raises(ToolError, match=r"Read shared\.ipynb with read_notebook before"):
        await tools.edit.execute(ctx, {"path": "shared.ipynb", "index": 0, "source": "x"})

    await tools.read.execute(ctx, {"path": "shared.ipynb"})
    # A person edits the notebook in JupyterLab meanwhile.
    theirs = _read(path)
    theirs.cells.append(_v4.new_markdown_cell("their cell"))
    _nbf.write(theirs, str(path))
    before = path.read_bytes()
    for tool, args in [
        (tools.edit, {"index": 0, "source": "mine"}),
        (tools.insert, {"source": "mine"}),
        (tools.delete, {"index": 0}),
        (tools.run, {"index": 1}),
    ]:
        with pytest.raises(ToolError, match="changed on disk since you last read it"):
            await tool.execute(ctx, {"path": "shared.ipynb", **args})
    assert path.read_bytes() == before
    # After reading again, the change goes through and keeps theirs.
    await tools.read.execute(ctx, {"path": "shared.ipynb"})
    await tools.insert.execute(ctx, {"path": "shared.ipynb", "source": "mine"})
    assert [c.source for c in _read(path).cells][-2:] == ["their cell", "mine"]
    # Another task has its own view: it must read first too.
    other = RecordingContext(tmp_path, task_id="other-task")
    with pytest.raises(ToolError, match="before changing it"):
        await tools.delete.execute(other, {"path": "shared.ipynb", "index": 0})


async def test_paths_must_stay_inside_the_workspace(tmp_path: Path) -> None:
    work = tmp_path / "ws"
    work.mkdir()
    outside = tmp_path / "outside.ipynb"
    _old_notebook(outside)
    (work / "link.ipynb").symlink_to(outside)
    (work / "data.csv").write_text("a,b\n")
    tools, ctx = Tools(), RecordingContext(work)
    for path in ["../outside.ipynb", str(outside), "link.ipynb"]:
        with pytest.raises(ToolError, match=r"outside the workspace|out of the workspace"):
            await tools.read.execute(ctx, {"path": path})
        with pytest.raises(ToolError, match=r"outside the workspace|out of the workspace"):
            await tools.insert.execute(ctx, {"path": path, "source": "x"})
    with pytest.raises(ToolError, match="not a notebook"):
        await tools.read.execute(ctx, {"path": "data.csv"})
    with pytest.raises(ToolError, match=r"no notebook at missing\.ipynb"):
        await tools.read.execute(ctx, {"path": "missing.ipynb"})
    assert outside.read_text().count('nbformat_minor": 4') == 1  # untouched


async def test_run_cell_streams_and_writes_outputs_back(tmp_path: Path) -> None:
    png = base64.b64encode(tiny_png()).decode()
    nb = _v4.new_notebook()
    nb.cells = [
        _v4.new_markdown_cell("# Run me"),
        _v4.new_code_cell(
            "import base64\nfrom IPython.display import Image, display\nprint('hi')\n"
            f"display(Image(data=base64.b64decode('{png}'), format='png'))\n2 + 3"
        ),
        _v4.new_code_cell("open('run.ipynb', 'a').write('\\n')\n'touched'"),
        _v4.new_code_cell("1 / 0"),
    ]
    path = tmp_path / "run.ipynb"
    _nbf.write(nb, str(path))
    async with running_service() as (svc, _):
        tools = Tools()
        ctx = RecordingContext(tmp_path, services={"kernels": svc})
        await tools.read.execute(ctx, {"path": "run.ipynb"})
        with pytest.raises(ToolError, match="only code cells run"):
            await tools.run.execute(ctx, {"path": "run.ipynb", "index": 0})

        result = await tools.run.execute(ctx, {"path": "run.ipynb", "index": 1})
        text = _text(result)
        assert "hi" in text and "Out[1]: 5" in text
        assert "saved to cell 1 of run.ipynb" in text
        assert any(isinstance(b, ImageBlock) for b in result.content)
        saved = _read(path).cells[1]
        assert saved.execution_count == 1
        assert [o.output_type for o in saved.outputs] == [
            "stream",
            "display_data",
            "execute_result",
        ]
        assert saved.outputs[1].data["image/png"].replace("\n", "") == png
        assert saved.outputs[2].data == {"text/plain": "5"}
        assert len(ctx.of_kind("cell_output")) == 1

        # The cell changes the notebook itself while it runs: its outputs are not
        # written over that change.
        touched = await tools.run.execute(ctx, {"path": "run.ipynb", "index": 2})
        assert "changed on disk while the cell ran" in _text(touched)
        assert _read(path).cells[2].outputs == []

        await tools.read.execute(ctx, {"path": "run.ipynb"})
        failed = await tools.run.execute(ctx, {"path": "run.ipynb", "index": 3})
        assert "ZeroDivisionError: division by zero" in _text(failed)
        error = _read(path).cells[3].outputs[0]
        assert (error.output_type, error.ename) == ("error", "ZeroDivisionError")


# ---- peer check against nbclient ------------------------------------------------------

_PEER_NOTEBOOKS = [
    [
        "print('a')\n1 + 1",
        "import sys\nprint('to stderr', file=sys.stderr)\nprint('to stdout')",
        "x = [i * i for i in range(5)]\nx",
        "# markdown: not run",
        "for i in range(3):\n    print(i)",
    ],
    [
        "from IPython.display import HTML, Markdown, display\ndisplay(HTML('<b>bold</b>'))\n"
        "display(Markdown('*it*'))",
        "import base64\nfrom IPython.display import Image\n"
        f"Image(data=base64.b64decode('{base64.b64encode(tiny_png()).decode()}'), format='png')",
        "raise ValueError('bad value')",
        "from IPython.display import clear_output\nprint('gone')\nclear_output()\nprint('kept')",
        "h = display('one', display_id=True)\nh.update('two')",
    ],
    [
        "import json\nprint(json.dumps({'k': [1, 2]}))",
        "def f(n):\n    return 1 / n\nf(0)",
        "%%capture c\nprint('hidden')",
        "c.stdout",
        "None",
    ],
]


def _normalized(outputs: list[Any]) -> list[dict[str, Any]]:
    """Outputs compared between runs: streams of one name merged, ids and
    tracebacks' file names left out."""
    merged: list[dict[str, Any]] = []
    for out in outputs:
        out = dict(out)
        if out["output_type"] == "stream" and merged and merged[-1].get("name") == out["name"]:
            merged[-1]["text"] += out["text"]
            continue
        out.pop("transient", None)
        if out["output_type"] == "error":
            out["traceback"] = [
                line
                for line in strip_ansi("\n".join(out["traceback"])).splitlines()
                if not re.search(r"ipykernel_\d+|File .*\.py", line)
            ]
        if "data" in out:
            out["data"] = {
                k: v.replace("\n", "") if k.startswith("image/") else v
                for k, v in out["data"].items()
            }
        merged.append(out)
    return merged


@pytest.mark.timeout(120)
async def test_outputs_match_nbclient_cell_by_cell(tmp_path: Path) -> None:
    root = short_tmp_dir()
    try:
        for n, sources in enumerate(_PEER_NOTEBOOKS):
            nb = _v4.new_notebook()
            nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
            nb.cells = [
                _v4.new_markdown_cell(s) if s.startswith("# markdown") else _v4.new_code_cell(s)
                for s in sources
            ]
            theirs = _nbf.reads(_nbf.writes(nb), as_version=4)
            await run_with_nbclient(theirs, tmp_path, root, name=f"peer{n}")

            async with running_service() as (svc, _):
                kernel = await svc.start_kernel(cwd=str(tmp_path))
                for i, cell in enumerate(nb.cells):
                    if cell.cell_type != "code":
                        continue
                    r = await svc.execute(kernel.kernel_id, cell.source)
                    ours = [notebook_output(o) for o in r.outputs]
                    expected = theirs.cells[i]
                    assert _normalized(ours) == _normalized(expected.outputs), (n, i, cell.source)
                    assert r.execution_count == expected.execution_count, (n, i)
    finally:
        shutil.rmtree(root, ignore_errors=True)
