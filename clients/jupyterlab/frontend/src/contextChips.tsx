/**
 * The prompt's context chips: the active notebook, its active cell, the
 * selection and the notebook's outline, read off the main area's current
 * notebook panel, shown above the prompt, each removable before sending
 * (`hdsp-context-chip`, `data-kind`; its `hdsp-context-remove` button).
 *
 * The notebook panel is read through the few members this needs (a duck type of
 * @jupyterlab/notebook's NotebookPanel), so that the panel takes no dependency
 * on the notebook package: a widget that is not a notebook gives no context.
 */
import type { ISignal } from '@lumino/signaling';
import React, { useCallback, useEffect, useState, useSyncExternalStore } from 'react';

import { CellFacts, Chip, ChipKind, chipsOf, contextOf, NotebookFacts, withoutRemoved } from './promptContext';
import type { PromptContext } from './wire';

// ---- the notebook, as much of it as the context needs ---------------------------

interface Position {
  line: number;
  column: number;
}

interface CellWidgetLike {
  model: {
    type: string;
    id: string;
    sharedModel: { getSource(): string };
    executionCount?: number | null;
    outputs?: { toJSON(): ReadonlyArray<Record<string, unknown>> };
  };
  editor?: {
    getSelection(): { start: Position; end: Position };
    getOffsetAt(position: Position): number;
  } | null;
}

interface NotebookPanelLike {
  context: { path: string };
  sessionContext?: { session?: { kernel?: { id: string } | null } | null };
  content: {
    activeCellIndex: number;
    activeCell: CellWidgetLike | null;
    widgets: ReadonlyArray<CellWidgetLike>;
    activeCellChanged: ISignal<unknown, unknown>;
  };
}

/** The main area's current widget and its change signal (JupyterLab's shell). */
export interface ShellLike {
  currentWidget: unknown;
  currentChanged?: ISignal<unknown, unknown>;
}

function asNotebook(widget: unknown): NotebookPanelLike | null {
  const w = widget as Partial<NotebookPanelLike> | null;
  const content = w?.content as Partial<NotebookPanelLike['content']> | undefined;
  if (
    !w ||
    typeof w.context?.path !== 'string' ||
    !content ||
    typeof content.activeCellIndex !== 'number' ||
    !Array.isArray(content.widgets)
  ) {
    return null;
  }
  return w as NotebookPanelLike;
}

function selectionOf(cell: CellWidgetLike | null): string {
  const editor = cell?.editor;
  if (!cell || !editor) {
    return '';
  }
  try {
    const { start, end } = editor.getSelection();
    const a = editor.getOffsetAt(start);
    const b = editor.getOffsetAt(end);
    return a === b ? '' : cell.model.sharedModel.getSource().slice(Math.min(a, b), Math.max(a, b));
  } catch {
    return '';
  }
}

function factsOf(panel: NotebookPanelLike): NotebookFacts {
  const cells: CellFacts[] = panel.content.widgets.map(cell => ({
    cellType: cell.model.type,
    id: cell.model.id,
    source: cell.model.sharedModel.getSource(),
    executionCount: cell.model.type === 'code' ? cell.model.executionCount ?? null : null,
    outputs: cell.model.type === 'code' ? cell.model.outputs?.toJSON() ?? [] : []
  }));
  return {
    path: panel.context.path,
    activeIndex: panel.content.activeCellIndex,
    cells,
    selection: selectionOf(panel.content.activeCell)
  };
}

/**
 * The active notebook's context, read again when the main area's widget or its
 * active cell changes, and on `refresh()` (the prompt got focus: the
 * selection and the outline may have changed since).
 */
export class NotebookContextSource {
  private listeners = new Set<() => void>();
  private context: PromptContext | null = null;
  private watched: NotebookPanelLike | null = null;

  constructor(private readonly shell: ShellLike) {
    shell.currentChanged?.connect(this.onCurrentChanged, this);
    this.onCurrentChanged();
  }

  readonly subscribe = (listener: () => void): (() => void) => {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  };

  readonly getContext = (): PromptContext | null => this.context;

  /**
   * The Jupyter kernel id the current notebook panel is connected to: the server
   * extension attaches that kernel (only if its own server runs it).
   */
  kernelId(): string | null {
    return asNotebook(this.shell.currentWidget)?.sessionContext?.session?.kernel?.id ?? null;
  }

  refresh(): void {
    const panel = asNotebook(this.shell.currentWidget);
    // (With the hdsp panel focused, the main area's notebook is still the current widget.)
    const next = panel ? contextOf(factsOf(panel)) : null;
    if (JSON.stringify(next) !== JSON.stringify(this.context)) {
      this.context = next;
      this.listeners.forEach(l => l());
    }
  }

  dispose(): void {
    this.shell.currentChanged?.disconnect(this.onCurrentChanged, this);
    this.watched?.content.activeCellChanged.disconnect(this.onActiveCell, this);
    this.listeners.clear();
  }

  private onCurrentChanged(): void {
    const panel = asNotebook(this.shell.currentWidget);
    if (panel !== this.watched) {
      this.watched?.content.activeCellChanged.disconnect(this.onActiveCell, this);
      this.watched = panel;
      panel?.content.activeCellChanged.connect(this.onActiveCell, this);
    }
    this.refresh();
  }

  private onActiveCell(): void {
    this.refresh();
  }
}

// ---- the chips ----------------------------------------------------------------

/**
 * The context to send with the prompt (less the chips removed), the chips to
 * show, and what removes a chip or starts over after sending. A removed chip
 * stays removed until the context changes (another notebook or cell) or the
 * prompt is sent.
 */
export function usePromptContext(source: NotebookContextSource | null): {
  context: PromptContext | null;
  chips: Chip[];
  remove: (kind: ChipKind) => void;
  reset: () => void;
  refresh: () => void;
} {
  const noSource = useCallback(() => () => undefined, []);
  const full = useSyncExternalStore(source?.subscribe ?? noSource, source?.getContext ?? (() => null));
  const [removed, setRemoved] = useState<ReadonlySet<ChipKind>>(new Set());
  const notebook = full?.notebook ?? null;
  const cell = full?.cell?.index ?? null;
  useEffect(() => setRemoved(new Set()), [notebook, cell]);
  const context = withoutRemoved(full, removed);
  return {
    context,
    chips: chipsOf(context),
    remove: (kind: ChipKind) => setRemoved(old => new Set([...old, kind])),
    reset: () => setRemoved(new Set()),
    refresh: () => source?.refresh()
  };
}

export function ContextChips(props: { chips: Chip[]; onRemove: (kind: ChipKind) => void }): JSX.Element | null {
  if (props.chips.length === 0) {
    return null;
  }
  return (
    <div className="hdsp-context" data-testid="hdsp-context">
      {props.chips.map(chip => (
        <span key={chip.kind} className="hdsp-context-chip" data-testid="hdsp-context-chip" data-kind={chip.kind} title={chip.title}>
          <span className="hdsp-context-label">{chip.label}</span>
          <button
            data-testid="hdsp-context-remove"
            className="hdsp-context-remove"
            title={`Do not send the ${chip.kind} with this prompt`}
            aria-label={`Remove the ${chip.kind}`}
            onClick={() => props.onRemove(chip.kind)}
          >
            ✕
          </button>
        </span>
      ))}
    </div>
  );
}

/** What context a user's message in the history carried (read-only chips). */
export function MessageContext(props: { context?: PromptContext | null }): JSX.Element | null {
  const chips = chipsOf(props.context ?? null);
  if (chips.length === 0) {
    return null;
  }
  return (
    <div className="hdsp-context hdsp-message-context" data-testid="hdsp-message-context">
      {chips.map(chip => (
        <span key={chip.kind} className="hdsp-context-chip" data-kind={chip.kind} title={chip.title}>
          {chip.label}
        </span>
      ))}
    </div>
  );
}
