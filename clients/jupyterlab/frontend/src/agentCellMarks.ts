/**
 * Cells the agent wrote, highlighted in every open notebook: the daemon's
 * notebook tools put a mark in `metadata.hdsp` of each cell they insert or edit
 * (`{editedBy: "agent", task, ts}`), whichever way the edit went (the shared
 * document, the notebook's window or the file). A cell that carries the mark
 * gets the class `hdsp-agent-cell` (style/agentCellMarks.css) and the task's id
 * in `data-hdsp-task`; the class follows the metadata as it changes.
 *
 * A widget extension of the `Notebook` widget factory (JupyterLab calls it for
 * every notebook panel it opens), reading each panel through the few members it
 * needs (duck types, as contextChips does), so that the panel takes no
 * dependency on the notebook package. The metadata comes from a file or a
 * shared document, which anyone may have written: only its `editedBy` and
 * `task` strings are read, and only as a class and an attribute.
 */
import type { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import type { ISignal } from '@lumino/signaling';

export const AGENT_CELL_CLASS = 'hdsp-agent-cell';
/** The widget factory whose panels are marked (JupyterLab's notebook editor). */
const NOTEBOOK_FACTORY = 'Notebook';
/** A task id longer than this is not shown (it is not one hdspd made). */
const MAX_TASK_ID = 128;

export interface AgentMark {
  /** The task that wrote the cell, when the mark names one. */
  task: string | null;
}

/** The agent's mark in a cell's `hdsp` metadata, or null for any other value. */
export function agentMarkOf(value: unknown): AgentMark | null {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return null;
  }
  const mark = value as Record<string, unknown>;
  if (mark.editedBy !== 'agent') {
    return null;
  }
  const task = typeof mark.task === 'string' && mark.task.length <= MAX_TASK_ID ? mark.task : null;
  return { task };
}

// ---- the notebook, as much of it as the marks need ---------------------------

interface CellModelLike {
  getMetadata(key: string): unknown;
  metadataChanged: ISignal<CellModelLike, unknown>;
}

interface CellLike {
  model: CellModelLike;
  node: HTMLElement;
}

interface NotebookModelLike {
  cells: { changed: ISignal<unknown, unknown> };
}

interface NotebookLike {
  model: NotebookModelLike | null;
  widgets: ReadonlyArray<CellLike>;
  modelChanged: ISignal<NotebookLike, void>;
}

interface NotebookPanelLike {
  content: NotebookLike;
  disposed: ISignal<unknown, void>;
}

function asNotebookPanel(widget: unknown): NotebookPanelLike | null {
  const panel = widget as Partial<NotebookPanelLike> | null;
  const content = panel?.content as Partial<NotebookLike> | undefined;
  if (!panel || !panel.disposed || !content || !content.modelChanged || !Array.isArray(content.widgets)) {
    return null;
  }
  return panel as NotebookPanelLike;
}

/** Put or take off the mark's class and attribute on one cell's node. */
export function showMark(node: HTMLElement, mark: AgentMark | null): void {
  node.classList.toggle(AGENT_CELL_CLASS, mark !== null);
  if (mark?.task) {
    node.dataset.hdspTask = mark.task;
  } else {
    delete node.dataset.hdspTask;
  }
}

/** The marks of one notebook panel, for as long as it lives. */
class NotebookMarks {
  private model: NotebookModelLike | null = null;
  private readonly watched = new WeakSet<CellModelLike>();

  constructor(private readonly panel: NotebookPanelLike) {
    panel.content.modelChanged.connect(this.onModel, this);
    panel.disposed.connect(this.dispose, this);
    this.onModel();
  }

  private onModel(): void {
    this.model?.cells.changed.disconnect(this.onCells, this);
    this.model = this.panel.content.model;
    this.model?.cells.changed.connect(this.onCells, this);
    this.onCells();
  }

  /** Cells came, went or moved (the notebook makes their widgets first). */
  private onCells(): void {
    for (const cell of this.panel.content.widgets) {
      if (!this.watched.has(cell.model)) {
        this.watched.add(cell.model);
        cell.model.metadataChanged.connect(this.onMetadata, this);
      }
      showMark(cell.node, agentMarkOf(cell.model.getMetadata('hdsp')));
    }
  }

  private onMetadata(model: CellModelLike): void {
    const cell = this.panel.content.widgets.find(w => w.model === model);
    if (cell) {
      showMark(cell.node, agentMarkOf(model.getMetadata('hdsp')));
    }
  }

  private dispose(): void {
    this.panel.content.modelChanged.disconnect(this.onModel, this);
    this.panel.disposed.disconnect(this.dispose, this);
    this.model?.cells.changed.disconnect(this.onCells, this);
    for (const cell of this.panel.content.widgets) {
      cell.model.metadataChanged.disconnect(this.onMetadata, this);
    }
  }
}

/** Marks the agent's cells in every notebook JupyterLab opens from now on. */
export const agentCellMarksPlugin: JupyterFrontEndPlugin<void> = {
  id: '@hdsp/jupyterlab:agent-cell-marks',
  description: "Highlights the notebook cells hdsp's agent inserted or edited.",
  autoStart: true,
  activate: (app: JupyterFrontEnd) => {
    app.docRegistry.addWidgetExtension(NOTEBOOK_FACTORY, {
      createNew: (widget: unknown) => {
        const panel = asNotebookPanel(widget);
        if (panel) {
          new NotebookMarks(panel);
        }
      }
    });
  }
};
