"""A stand-in for the hdsp server extension, for looking at the panel by hand
before the real one exists: it answers the contract's HTTP surface
(clients/jupyterlab/CONTRACT.md) from the committed recording of a daemon run
(clients/jupyterlab/frontend/test/fixtures/), and its WebSocket plays that
run's frames. Not shipped, not a test; see `python -m tests.jupyterlab_frontend.standin_server`.

    jupyter lab --ServerApp.jpserver_extensions='{"tests.jupyterlab_frontend.standin_server": true}'
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from jupyter_server.base.handlers import APIHandler, JupyterHandler
from jupyter_server.utils import url_path_join
from tornado import web, websocket

__all__ = ["load_jupyter_server_extension"]

_FIXTURE = (
    Path(__file__).resolve().parents[2]
    / "clients/jupyterlab/frontend/test/fixtures/write-approve-run.json"
)


def _recording() -> dict[str, Any]:
    """The recording, cut after the first event named $HDSP_STANDIN_UNTIL if set
    (e.g. `taskInteractive`: the panel then shows the ask waiting)."""
    data: dict[str, Any] = json.loads(_FIXTURE.read_text())
    until = os.environ.get("HDSP_STANDIN_UNTIL")
    if until:
        names = [f["event"]["data"]["eventName"] for f in data["frames"]]
        data["frames"] = data["frames"][: names.index(until) + 1]
        data["snapshot"] = {
            **data["snapshot"],
            "messages": [],
            "pendingAsk": None,
            "state": "running",
            "headSeq": data["sinceSeq"],
        }
    return data


class _Status(APIHandler):
    @web.authenticated
    def get(self) -> None:
        rec = _recording()
        self.finish(
            json.dumps({"daemon": "running", "hint": None, "status": {"headSeq": rec["sinceSeq"]}})
        )


class _Command(APIHandler):
    @web.authenticated
    def post(self) -> None:
        rec = _recording()
        command = json.loads(self.request.body)["command"]
        name = command["commandName"]
        snap = rec["snapshot"]
        if name == "ListTasks":
            result: Any = {"tasks": [snap["item"]]}
        elif name == "GetTask":
            result = snap
        elif name == "ListProfiles":
            result = {
                "profiles": [
                    {"name": "demo", "provider": "demo", "model": "hdsp-demo", "source": "builtin"}
                ],
                "current": "demo",
            }
        else:
            self.set_status(409)
            self.finish(
                json.dumps(
                    {
                        "error": {
                            "code": "invalid_state",
                            "message": f"The stand-in does not run {name}.",
                        }
                    }
                )
            )
            return
        self.finish(json.dumps({"result": result}))


class _Events(websocket.WebSocketHandler, JupyterHandler):  # type: ignore[misc]
    def open(self, *args: Any, **kwargs: Any) -> None:
        self.write_message(json.dumps({"kind": "connection", "state": "connected", "hint": None}))
        for frame in _recording()["frames"]:
            self.write_message(json.dumps(frame))


class _OpenRecordedTask(JupyterHandler):
    """A page that makes the panel open the recorded task, then goes to Lab (for
    a headless browser's screenshot, which cannot click)."""

    @web.authenticated
    def get(self) -> None:
        task_id = json.dumps(_recording()["taskId"])
        lab = json.dumps(url_path_join(self.base_url, "lab"))
        self.finish(
            f"<script>localStorage.setItem('hdsp:open-task', {task_id});"
            f"location.replace({lab});</script>"
        )


def load_jupyter_server_extension(serverapp: Any) -> None:
    base = serverapp.web_app.settings["base_url"]
    serverapp.web_app.add_handlers(
        ".*$",
        [
            (url_path_join(base, "hdsp/status"), _Status),
            (url_path_join(base, "hdsp/command"), _Command),
            (url_path_join(base, "hdsp/events"), _Events),
            (url_path_join(base, "hdsp-standin/open"), _OpenRecordedTask),
        ],
    )


_load_jupyter_server_extension = load_jupyter_server_extension
