"""The `Client`'s typed requests about the daemon and its settings:
:class:`DaemonRequests`."""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from typing import Any

from hdsp.protocol import (
    AgentList,
    AnswerDocumentEdit,
    BlobData,
    CommandList,
    DocumentEditAnswer,
    DocumentEditTaken,
    DocumentRoute,
    DocumentsHosted,
    GetBlob,
    GetBlobData,
    GetCommands,
    GetCommandsData,
    GetModes,
    GetModesData,
    GetStatus,
    HostDocuments,
    ListAgents,
    ListMcpServers,
    McpServerList,
    McpServerStatus,
    ModeList,
    Ping,
    Pong,
    RestartMcpServer,
    Shutdown,
    StatusResult,
    TrustMcpServer,
)
from hdsp.protocol.settings import (
    DeleteProfile,
    DeleteSecret,
    ExportSettings,
    GetModels,
    GetModelsData,
    GetSettings,
    ImportResult,
    ImportSettings,
    ImportSettingsData,
    ListProfiles,
    ModelList,
    ProfileData,
    ProfileInfo,
    ProfileList,
    ProfileNameData,
    SaveProfile,
    SaveProfileData,
    SecretInfo,
    SecretNameData,
    SelectProfile,
    SetSecret,
    SetSecretData,
    SettingsExport,
    SettingsView,
    UpdateSettings,
    UpdateSettingsData,
)

from .client_requests import Requests, absolute_workspace
from .errors import ProtocolError

__all__ = ["DaemonRequests"]


class DaemonRequests(Requests):
    """The daemon itself (ping, status, shutdown), what it stores and hosts
    (blobs, notebook document hosts), its settings, profiles and secrets, and
    what they and a workspace configure: models, modes, agents, slash commands
    and MCP servers."""

    async def get_blob(
        self, sha256: str, *, offset: int = 0, length: int | None = None
    ) -> BlobData:
        """Part of an image stored once (from a `hdsp-blob:` reference): as many
        bytes from `offset` on as fit in one reply (see hdsp.protocol.blobs)."""
        result: BlobData = await self.request(
            GetBlob(data=GetBlobData(sha256=sha256, offset=offset, length=length))
        )
        return result

    async def host_documents(
        self,
        host_id: str,
        route: DocumentRoute,
        paths: list[str],
        *,
        lease_seconds: float = 60.0,
    ) -> DocumentsHosted:
        """Declare this client a document host of the notebooks at `paths`
        (absolute), replacing what `host_id` declared before (see
        hdsp.protocol.documents); an empty list withdraws it."""
        cmd = HostDocuments(
            host_id=host_id, route=route, paths=list(paths), lease_seconds=lease_seconds
        )
        result: DocumentsHosted = await self.request(cmd)
        return result

    async def answer_document_edit(self, answer: DocumentEditAnswer) -> bool:
        """Answer a `documentEditRequested`; False when the daemon no longer waits."""
        result: DocumentEditTaken = await self.request(AnswerDocumentEdit(data=answer))
        return result.taken

    async def blob(self, sha256: str) -> tuple[str, bytes]:
        """The media type and the bytes of a whole blob, fetched in as many
        replies as its size takes."""
        first = await self.get_blob(sha256)
        parts = [base64.b64decode(first.data)]
        got = len(parts[0])
        while got < first.size:
            page = await self.get_blob(sha256, offset=got)
            chunk = base64.b64decode(page.data)
            if not chunk:
                raise ProtocolError(f"The daemon sent no bytes of blob {sha256} at {got}.")
            parts.append(chunk)
            got += len(chunk)
        return first.media_type, b"".join(parts)

    async def ping(self) -> Pong:
        return await self.request(Ping())

    async def status(self) -> StatusResult:
        return await self.request(GetStatus())

    async def shutdown(self) -> None:
        return await self.request(Shutdown())

    # ---- MCP servers --------------------------------------------------------------

    async def list_mcp_servers(
        self, workspace: str | None = None, *, start: bool = False
    ) -> McpServerList:
        """The MCP servers a task in `workspace` has, with their state; `start`
        starts those not started and waits until each connected or failed."""
        return await self.request(ListMcpServers(workspace=workspace, start=start))

    async def restart_mcp_server(self, name: str, workspace: str | None = None) -> McpServerStatus:
        """Restart an MCP server; the reply waits until it connected or failed."""
        return await self.request(RestartMcpServer(name=name, workspace=workspace))

    async def trust_mcp_server(
        self, name: str, workspace: str, *, trusted: bool = True, fingerprint: str | None = None
    ) -> McpServerStatus:
        """Trust (or stop trusting) a server of `workspace`'s .hdsp/mcp.json as it
        is written now; with `fingerprint` (its status's), only if it still is
        what that status described (else CommandFailed, invalid_state)."""
        return await self.request(
            TrustMcpServer(name=name, workspace=workspace, trusted=trusted, fingerprint=fingerprint)
        )

    # ---- settings, profiles, secrets ------------------------------------------

    async def get_settings(self) -> SettingsView:
        """The daemon's settings document; secrets only as names and whether set."""
        return await self.request(GetSettings())

    async def update_settings(self, patch: Mapping[str, Any]) -> SettingsView:
        """Change settings with a JSON Merge Patch (`None` removes a key). An invalid
        result is refused whole: CommandFailed, its `details["errors"]` listing fields."""
        data = UpdateSettingsData(patch=dict(patch))
        return await self.request(UpdateSettings(data=data))

    async def list_profiles(self) -> ProfileList:
        return await self.request(ListProfiles())

    async def save_profile(
        self,
        name: str,
        *,
        provider: str,
        model: str,
        base_url: str | None = None,
        options: Mapping[str, Any] | None = None,
        secret: str | None = None,
        select: bool = False,
    ) -> ProfileInfo:
        """Save (or replace) a provider profile; `secret` is the NAME of the secret
        holding its key (`set_secret`), never the key. `select` makes it current."""
        profile = ProfileData(
            name=name,
            provider=provider,
            model=model,
            base_url=base_url,
            options=dict(options or {}),
            secret=secret,
        )
        cmd = SaveProfile(data=SaveProfileData(profile=profile, select=select))
        return await self.request(cmd)

    async def delete_profile(self, name: str) -> ProfileList:
        return await self.request(DeleteProfile(data=ProfileNameData(name=name)))

    async def select_profile(self, name: str) -> ProfileList:
        """Make `name` the profile new tasks use when they name none."""
        return await self.request(SelectProfile(data=ProfileNameData(name=name)))

    async def set_secret(self, name: str, value: str) -> SecretInfo:
        """Store a secret in the daemon's keyring. The value goes over the local
        socket once and is never sent back."""
        cmd = SetSecret(data=SetSecretData(name=name, value=value))
        return await self.request(cmd)

    async def delete_secret(self, name: str) -> SecretInfo:
        return await self.request(DeleteSecret(data=SecretNameData(name=name)))

    async def export_settings(self) -> SettingsExport:
        """The settings to copy elsewhere: secrets only as names."""
        return await self.request(ExportSettings())

    async def import_settings(
        self, settings: Mapping[str, Any], *, merge: bool = True
    ) -> ImportResult:
        """Apply a settings document; what does not validate is left out and listed
        in `rejected`."""
        data = ImportSettingsData(settings=dict(settings), merge=merge)
        return await self.request(ImportSettings(data=data))

    async def get_models(self, provider: str | None = None) -> ModelList:
        """The daemon's model table (with the settings' overrides)."""
        cmd = GetModels(data=GetModelsData(provider=provider))
        return await self.request(cmd)

    async def get_modes(self, workspace: str | os.PathLike[str] | None = None) -> ModeList:
        """The modes a task can be in (with `workspace`'s own, from its
        `.hdsp/modes.yaml`); `problems` says why a custom mode was left out."""
        data = GetModesData(workspace=absolute_workspace(workspace) if workspace else None)
        return await self.request(GetModes(data=data))

    async def list_agents(self) -> AgentList:
        """The agents a task can run (`start_task(agent=...)`) and call."""
        return await self.request(ListAgents())

    async def get_commands(self, workspace: str | os.PathLike[str] | None = None) -> CommandList:
        """The slash commands (global, and `workspace`'s `.hdsp/commands/`)."""
        data = GetCommandsData(workspace=absolute_workspace(workspace) if workspace else None)
        return await self.request(GetCommands(data=data))
