"""A benchmark's peer process (see `peers`), spoken to by lines on stdin/stdout."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Mapping, Sequence

import anyio
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

__all__ = ["Peer", "PeerFailed"]


class PeerFailed(RuntimeError):
    pass


class Peer:
    def __init__(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, patience: float = 120
    ) -> None:
        self.argv = list(argv)
        #: Seconds to wait for any one answer from the peer, or for it to end.
        self.patience = patience
        self.env = dict(env) if env is not None else None
        self._proc: Process | None = None
        self._lines: BufferedByteReceiveStream | None = None
        self._stderr = tempfile.TemporaryFile()

    async def launch(self) -> None:
        self._proc = await anyio.open_process(
            self.argv,
            env=self.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
        )
        assert self._proc.stdout is not None
        self._lines = BufferedByteReceiveStream(self._proc.stdout)

    async def start(self) -> None:
        await self.launch()
        await self.expect("ready")

    async def line(self) -> str:
        """The next line the peer prints; PeerFailed, with its stderr, if none comes."""
        assert self._lines is not None
        try:
            with anyio.fail_after(self.patience):
                return (await self._lines.receive_until(b"\n", 1 << 24)).decode().strip()
        except (TimeoutError, anyio.EndOfStream, anyio.IncompleteRead):
            raise PeerFailed(
                f"{self.argv[3:4]} said nothing more:\n{self._stderr_tail()}"
            ) from None

    async def expect(self, word: str) -> None:
        line = await self.line()
        if line != word:
            raise PeerFailed(
                f"{self.argv[3:4]} said {line!r}, not {word!r}:\n{self._stderr_tail()}"
            )

    def _stderr_tail(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read()[-4000:].decode(errors="replace")

    async def send(self, line: str) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        await self._proc.stdin.send(line.encode() + b"\n")

    async def stop(self) -> None:
        proc = self._proc
        if proc is None:
            return
        with anyio.CancelScope(shield=True):
            if proc.stdin is not None:
                await proc.stdin.aclose()  # a peer ends when its stdin does
            with anyio.move_on_after(self.patience):
                await proc.wait()
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            await proc.aclose()
        self._stderr.close()
