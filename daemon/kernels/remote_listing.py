"""What a Jupyter server runs: its kernels and sessions, as ListRemoteKernels
shows them, each kernel with hdsp's id for it when hdsp uses it."""

from __future__ import annotations

from typing import Any

from hdsp.protocol import RemoteKernel, RemoteKernelList, RemoteSession

from .errors import KernelError
from .gateway import GatewayTarget, ServerApi

__all__ = ["list_remote_kernels"]


async def list_remote_kernels(
    target: GatewayTarget, used: dict[str | None, str]
) -> RemoteKernelList:
    """The kernels and sessions of the Jupyter server `target`; `used`: hdsp's
    kernel ids by remote id, of the kernels hdsp uses there."""
    async with ServerApi(target) as api:
        kernels = await api.kernels()
        sessions_error = None
        try:
            sessions = await api.sessions()
        except KernelError as exc:
            sessions, sessions_error = [], exc.message
    return RemoteKernelList(
        server_url=target.shown,
        kernels=[_remote_kernel(model, used) for model in kernels if _text(model.get("id"))],
        sessions=[_remote_session(model) for model in sessions if _text(model.get("id"))],
        sessions_error=sessions_error,
    )


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _remote_kernel(model: dict[str, Any], used: dict[str | None, str]) -> RemoteKernel:
    remote_id = str(model["id"])
    connections = model.get("connections")
    return RemoteKernel(
        remote_id=remote_id,
        name=_text(model.get("name")),
        execution_state=_text(model.get("execution_state")),
        last_activity=_text(model.get("last_activity")),
        connections=connections if isinstance(connections, int) else None,
        kernel_id=used.get(remote_id),
    )


def _remote_session(model: dict[str, Any]) -> RemoteSession:
    kernel = model.get("kernel")
    notebook = model.get("notebook")
    path = _text(model.get("path"))
    if path is None and isinstance(notebook, dict):
        path = _text(notebook.get("path"))
    return RemoteSession(
        session_id=str(model["id"]),
        path=path,
        name=_text(model.get("name")),
        type=_text(model.get("type")),
        remote_kernel_id=_text(kernel.get("id")) if isinstance(kernel, dict) else None,
    )
