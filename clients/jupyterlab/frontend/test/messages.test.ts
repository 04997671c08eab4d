import { blobRef, cellOf, fence, FOLD_LINES, imageSrc, outputBundle, stripAnsi, toolOf, toolResultOf } from '../src/messages';

const SHA = '9f2b5c0e4f3d1a7b8c6e5d4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b';

describe('message helpers', () => {
  it('reads blob references, with and without a media type', () => {
    expect(blobRef(`hdsp-blob:image/png;sha256,${SHA}`)).toEqual({ sha256: SHA, mediaType: 'image/png' });
    expect(blobRef(`hdsp-blob:sha256,${SHA}`)).toEqual({ sha256: SHA, mediaType: null });
    expect(blobRef('hdsp-blob:sha256,../../etc/passwd')).toBe(null);
  });

  it('gives an image source only for blobs and image data', () => {
    const blob = (sha: string) => `/hdsp/blob/${sha}`;
    expect(imageSrc(`hdsp-blob:image/png;sha256,${SHA}`, blob)).toBe(`/hdsp/blob/${SHA}`);
    expect(imageSrc('data:image/png;base64,iVBORw0KGgo=', blob)).toBe('data:image/png;base64,iVBORw0KGgo=');
    expect(imageSrc('iVBORw0KGgo=', blob)).toBe('data:image/png;base64,iVBORw0KGgo=');
    expect(imageSrc('javascript:alert(1)', blob)).toBe(null);
    expect(imageSrc('data:text/html;base64,PHNjcmlwdD4=', blob)).toBe(null);
  });

  it('fences code so that its own backticks cannot end the fence', () => {
    expect(fence('print(1)')).toBe('```python\nprint(1)\n```');
    expect(fence('s = """```"""')).toBe('````python\ns = """```"""\n````');
  });

  it('reads tool calls and cells, and refuses what is not one', () => {
    expect(toolOf({ ts: 1, type: 'ask', ask: 'tool', text: '{"tool": "write_to_file", "path": "a.md", "diff": "+x", "isNewFile": true}' })).toMatchObject({
      tool: 'write_to_file',
      path: 'a.md',
      diff: '+x',
      args: { isNewFile: true }
    });
    expect(toolOf({ ts: 1, type: 'say', say: 'tool', text: 'not json' })).toBe(null);
    expect(cellOf({ ts: 1, type: 'say', say: 'cell_output', text: '{"kernelId": "k", "code": "1+1", "status": "ok", "outputs": []}' })).toMatchObject({
      code: '1+1',
      status: 'ok'
    });
  });

  it('turns kernel outputs into bundles; tracebacks lose their colour codes', () => {
    expect(outputBundle({ outputType: 'stream', name: 'stderr', text: 'w' })).toEqual({ 'application/vnd.jupyter.stderr': 'w' });
    expect(outputBundle({ outputType: 'error', ename: 'E', evalue: 'v', traceback: ['\x1b[31mE\x1b[0m: v'] })).toEqual({
      'application/vnd.jupyter.stderr': 'E: v'
    });
    expect(stripAnsi('\x1b[1;32mok\x1b[0m')).toBe('ok');
  });

  it('reads a tool result as the CLI shows it: its text, folded, red when an error', () => {
    const say = (text: string) => ({ ts: 1, type: 'say' as const, say: 'tool_result', text });
    const long = Array.from({ length: FOLD_LINES + 5 }, (_, i) => `line ${i}`).join('\n');
    const r = toolResultOf(say(JSON.stringify({ tool: 'read_file', text: long, images: 1, omitted: 1200 })));
    expect(r.tool).toBe('read_file');
    expect(r.head.split('\n')).toHaveLength(FOLD_LINES);
    expect(r.more.split('\n')).toHaveLength(5);
    expect(r.isError).toBe(false);
    expect(r.notes).toEqual(['[1 image(s)]', `[${(1200).toLocaleString()} characters not kept]`]);
    const failed = toolResultOf(say('{"tool": "write_to_file", "text": "Error: denied", "isError": true}'));
    expect([failed.head, failed.more, failed.isError]).toEqual(['Error: denied', '', true]);
    expect(toolResultOf(say('{"tool": "x", "text": "  "}')).head).toBe('(nothing)');
    // Not JSON (an older record): its text as it is, never an error.
    expect(toolResultOf(say('plain <b>text</b>'))).toMatchObject({ head: 'plain <b>text</b>', isError: false });
  });
});
