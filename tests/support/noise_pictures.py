"""Pictures of noise (PNG cannot compress them, so their size is known): made
here, or by a cell that displays one as a plot would."""

from __future__ import annotations

import io
import random

from PIL import Image

__all__ = ["noise_plot_code", "noise_png"]


def noise_png(width: int, height: int, seed: int) -> bytes:
    """A PNG of `width` x `height` pixels of noise (the same for the same seed)."""
    out = io.BytesIO()
    pixels = random.Random(seed).randbytes(width * height * 3)
    Image.frombytes("RGB", (width, height), pixels).save(out, format="PNG")
    return out.getvalue()


def noise_plot_code(width: int, height: int, *, seed: int | None = None) -> str:
    """Python for a kernel: display a PNG of noise (`seed` for the same one each
    time, else fresh noise, saved fast)."""
    noise = f"random.Random({seed}).randbytes" if seed is not None else "os.urandom"
    level = "" if seed is not None else ", compress_level=1"
    return f"""\
import io, os, random
from PIL import Image
from IPython.display import Image as Show, display
im = Image.frombytes("RGB", ({width}, {height}), {noise}({width} * {height} * 3))
buf = io.BytesIO()
im.save(buf, format="PNG"{level})
display(Show(data=buf.getvalue()))
"""
