"""What a model reads of a kernel's outputs (`render_for_model`), from outputs
made here: no kernel, no daemon. The tests in test_kernels.py render what a real
ipykernel produced."""

from __future__ import annotations

import base64

from hdsp.daemon.bounded_text import BoundedText
from hdsp.daemon.conversation import ImageBlock, TextBlock
from hdsp.daemon.tools.kernel_output import cut_text, render_for_model, strip_ansi
from hdsp.protocol import KernelOutput
from tests.support.kernel_helpers import tiny_png


def _text(blocks: list[TextBlock | ImageBlock]) -> str:
    first = blocks[0]
    assert isinstance(first, TextBlock)
    return first.text


def _stream(text: str, name: str = "stdout") -> KernelOutput:
    return KernelOutput(output_type="stream", name=name, text=text)


def test_streams_show_a_progress_bar_in_its_last_state_and_mark_stderr() -> None:
    blocks = render_for_model(
        [_stream("loading\n 10%\r 50%\r100%\n"), _stream("careful\n", "stderr")]
    )
    assert _text(blocks) == "loading\n100%\n[stderr]\ncareful"


def test_a_result_is_labelled_and_its_best_text_is_shown() -> None:
    result = KernelOutput(
        output_type="execute_result",
        execution_count=7,
        data={"text/html": "<b>42</b>", "text/plain": "42"},
    )
    shown_json = KernelOutput(output_type="display_data", data={"application/json": {"a": [1]}})
    unreadable = KernelOutput(output_type="display_data", data={"application/x-widget": "{}"})
    text = _text(render_for_model([result, shown_json, unreadable]))
    assert text == 'Out[7]: 42\n{"a": [1]}\n[output of type application/x-widget]'


def test_an_error_reads_without_terminal_codes() -> None:
    error = KernelOutput(
        output_type="error",
        ename="KeyError",
        evalue="\x1b[31m'x'\x1b[0m",
        traceback=["\x1b[0;31mKeyError\x1b[0m: 'x'", "  in \x1b[1mf\x1b[0m"],
    )
    text = _text(render_for_model([error]))
    assert text == "KeyError: 'x'\nTraceback:\nKeyError: 'x'\n  in f"
    assert strip_ansi("\x1b]8;;http://x\x07link\x1b]8;;\x07") == "link"


def test_images_become_image_blocks_up_to_the_limit() -> None:
    png = base64.b64encode(tiny_png()).decode()
    images = [KernelOutput(output_type="display_data", data={"image/png": png}) for _ in range(3)]
    blocks = render_for_model(images, max_images=2)
    assert (
        _text(blocks) == "[image 1: image/png]\n[image 2: image/png]\n[1 more image(s) not shown]"
    )
    assert [b.data for b in blocks[1:] if isinstance(b, ImageBlock)] == [png, png]


def test_an_image_that_cannot_be_decoded_is_said_in_text() -> None:
    broken = KernelOutput(output_type="display_data", data={"image/png": "bm90IGEgcG5n"})
    blocks = render_for_model([broken])
    assert len(blocks) == 1 and "image" in _text(blocks).lower()


def test_long_text_is_cut_to_head_and_tail_with_counts() -> None:
    text = "".join(f"line {i}\n" for i in range(10_000))
    cut = cut_text(text, 1_000)
    assert cut.startswith("line 0\n") and cut.endswith("line 9999\n")
    assert f"left out of {len(text):,}" in cut and "at least" not in cut
    assert cut_text("short", 1_000) == "short"


def test_cutting_counts_what_a_bounded_stream_dropped_before() -> None:
    buffer = BoundedText(3_000)
    for i in range(100_000):
        buffer.append(f"row {i}\n")
    buffer.append("end")
    kept = buffer.text()
    cut = _text(render_for_model([_stream(kept)], text_limit=1_000))
    assert cut.startswith("row 0\n") and cut.endswith("row 99999\nend")
    # The whole stream's size, not the kept text's, and lines as "at least".
    assert f"left out of {buffer.size:,} ..." in cut
    assert "at least" in cut
