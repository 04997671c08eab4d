/**
 * The prompt's context (PromptContext on the wire): what the active notebook
 * panel shows when the user writes to hdsp — its path, the active cell, the
 * selection, a compact outline — as chips the user can remove before sending.
 * Pure functions here (the jest tests run them); the chips' view and the
 * notebook they read are in contextChips.tsx.
 *
 * The bounds are the protocol's (protocol/prompt_context.py): the daemon refuses
 * a context past them, so it is cut here first, the same way the daemon cuts an
 * outline it reads from a file.
 */
import type { OutlineCell, PromptContext } from './wire';

export const MAX_SELECTION_CHARS = 8000;
export const MAX_OUTLINE_CELLS = 200;
export const MAX_CELL_HEAD_LINES = 3;
export const MAX_CELL_HEAD_CHARS = 240;
export const MAX_OUTPUT_KINDS = 16;

/** The kinds of chip (`data-kind` of `hdsp-context-chip`). */
export type ChipKind = 'notebook' | 'cell' | 'selection' | 'outline';
export const CHIP_KINDS: ChipKind[] = ['notebook', 'cell', 'selection', 'outline'];

/** A cell as the outline needs it (read off JupyterLab's cell model). */
export interface CellFacts {
  cellType: string;
  id?: string | null;
  source: string;
  executionCount?: number | null;
  outputs?: ReadonlyArray<Record<string, unknown>>;
}

/** Python's str.splitlines for \n, \r\n and \r: no empty last line. */
export function splitLines(source: string): string[] {
  if (source === '') {
    return [];
  }
  const lines = source.split(/\r\n|\r|\n/);
  if (lines[lines.length - 1] === '') {
    lines.pop();
  }
  return lines;
}

function outputKind(output: Record<string, unknown>): string {
  const kind = String(output.output_type ?? 'unknown');
  if (kind === 'display_data' || kind === 'execute_result' || kind === 'update_display_data') {
    const data = (output.data ?? {}) as Record<string, unknown>;
    const rich = Object.keys(data).filter(k => k !== 'text/plain');
    return (rich[0] ?? 'text/plain').slice(0, 64);
  }
  return kind.slice(0, 64);
}

export function outputKinds(outputs: ReadonlyArray<Record<string, unknown>> | undefined): string[] {
  const kinds: string[] = [];
  for (const output of outputs ?? []) {
    const kind = outputKind(output);
    if (!kinds.includes(kind)) {
      kinds.push(kind);
    }
    if (kinds.length === MAX_OUTPUT_KINDS) {
      break;
    }
  }
  return kinds;
}

export function outlineCell(cell: CellFacts): OutlineCell {
  const lines = splitLines(cell.source);
  let head = lines.slice(0, MAX_CELL_HEAD_LINES).join('\n');
  if (head.length > MAX_CELL_HEAD_CHARS) {
    head = head.slice(0, MAX_CELL_HEAD_CHARS - 1) + '…';
  }
  const type = cell.cellType === 'code' || cell.cellType === 'markdown' ? cell.cellType : 'raw';
  const out: OutlineCell = { cellType: type, head, lines: lines.length };
  if (cell.id) {
    out.id = cell.id.slice(0, 128);
  }
  if (typeof cell.executionCount === 'number' && cell.executionCount >= 0) {
    out.executionCount = cell.executionCount;
  }
  const kinds = outputKinds(cell.outputs);
  if (kinds.length > 0) {
    // (The generated type spells the protocol's bound as tuples.)
    out.outputKinds = kinds as OutlineCell['outputKinds'];
  }
  return out;
}

/** The outline of a notebook's cells, cut at MAX_OUTLINE_CELLS. */
export function outlineOf(cells: ReadonlyArray<CellFacts>): { outline: OutlineCell[]; truncated: boolean } {
  return {
    outline: cells.slice(0, MAX_OUTLINE_CELLS).map(outlineCell),
    truncated: cells.length > MAX_OUTLINE_CELLS
  };
}

/** What the panel saw of the active notebook. */
export interface NotebookFacts {
  path: string;
  activeIndex: number | null;
  cells: ReadonlyArray<CellFacts>;
  selection: string;
}

/** The whole context of a notebook as the panel sees it (before any chip is removed). */
export function contextOf(facts: NotebookFacts | null): PromptContext | null {
  if (facts === null || !facts.path) {
    return null;
  }
  const context: PromptContext = { notebook: facts.path };
  const index = facts.activeIndex;
  if (index !== null && index >= 0 && index < facts.cells.length) {
    const id = facts.cells[index].id;
    context.cell = id ? { index, id: id.slice(0, 128) } : { index };
  }
  if (facts.selection.trim()) {
    context.selection = facts.selection.slice(0, MAX_SELECTION_CHARS);
  }
  const { outline, truncated } = outlineOf(facts.cells);
  context.outline = outline;
  if (truncated) {
    context.truncated = true;
  }
  return context;
}

/** The context less the chips the user removed; null when nothing is left. */
export function withoutRemoved(
  context: PromptContext | null,
  removed: ReadonlySet<ChipKind>
): PromptContext | null {
  if (context === null) {
    return null;
  }
  const kept: PromptContext = { ...context };
  if (removed.has('notebook')) {
    delete kept.notebook;
  }
  if (removed.has('cell')) {
    delete kept.cell;
  }
  if (removed.has('selection')) {
    delete kept.selection;
  }
  if (removed.has('outline')) {
    delete kept.outline;
    delete kept.truncated;
  }
  // The browser never names a kernel (the server extension does).
  delete kept.kernelId;
  return kept.notebook || kept.cell || kept.selection || kept.outline ? kept : null;
}

/** One chip: its kind, its words and its tooltip. */
export interface Chip {
  kind: ChipKind;
  label: string;
  title: string;
}

function basename(path: string): string {
  const parts = path.split('/');
  return parts[parts.length - 1] || path;
}

/** The chips of a context, in a fixed order. */
export function chipsOf(context: PromptContext | null): Chip[] {
  if (context === null) {
    return [];
  }
  const chips: Chip[] = [];
  if (context.notebook) {
    chips.push({ kind: 'notebook', label: basename(context.notebook), title: `Notebook ${context.notebook}` });
  }
  if (context.cell) {
    const count = context.outline?.[context.cell.index]?.executionCount;
    const label = `cell ${context.cell.index + 1}` + (typeof count === 'number' ? ` [${count}]` : '');
    chips.push({ kind: 'cell', label, title: `The active cell (index ${context.cell.index})` });
  }
  if (context.selection) {
    const one = context.selection.replace(/\s+/g, ' ').trim();
    const label = one.length > 24 ? `“${one.slice(0, 23)}…”` : `“${one}”`;
    chips.push({ kind: 'selection', label, title: `The selection (${context.selection.length} characters)` });
  }
  if (context.outline) {
    const n = context.outline.length;
    chips.push({
      kind: 'outline',
      label: `outline (${n}${context.truncated ? '+' : ''} cell${n === 1 ? '' : 's'})`,
      title: 'A compact outline of the notebook: cell types, first lines, execution counts, output kinds'
    });
  }
  return chips;
}
