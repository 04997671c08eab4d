/**
 * The open task's mode and todo list (issue 21): the list the agent keeps with
 * `update_todo_list`, shown as a checklist, and editable as markdown (the edit
 * goes to the daemon as UpdateTodoList, which tells the model). Text is the
 * task's (model-written): React renders it as text, never as HTML.
 */

import React, { useState } from 'react';

import type { TodoItem } from './wire';

const MARKS: Record<string, string> = { pending: ' ', in_progress: '-', completed: 'x' };
const ICONS: Record<string, string> = { pending: '○', in_progress: '◐', completed: '●' };

export function todoMarkdown(items: TodoItem[]): string {
  return items.map(i => `- [${MARKS[i.status ?? 'pending'] ?? ' '}] ${i.content}`).join('\n');
}

export function TodoList(props: {
  mode: string | null | undefined;
  todos: TodoItem[] | null | undefined;
  onSave: (markdown: string) => Promise<void>;
}): JSX.Element | null {
  const [draft, setDraft] = useState<string | null>(null);
  const todos = props.todos ?? [];
  if (todos.length === 0 && draft === null && !props.mode) {
    return null;
  }
  const done = todos.filter(t => t.status === 'completed').length;
  return (
    <div data-testid="hdsp-todo-list" className="hdsp-todo-list" data-mode={props.mode ?? ''}>
      <div className="hdsp-todo-head">
        {props.mode && <span data-testid="hdsp-mode" className="hdsp-badge">{props.mode}</span>}
        {todos.length > 0 && (
          <span className="hdsp-note">
            Todo {done}/{todos.length}
          </span>
        )}
        {draft === null && (
          <button data-testid="hdsp-todo-edit" className="jp-Button hdsp-button" title="Edit the todo list (the agent is told)" onClick={() => setDraft(todoMarkdown(todos))}>
            Edit todo
          </button>
        )}
      </div>
      {draft === null ? (
        <ul className="hdsp-todo-items">
          {todos.map(t => (
            <li key={t.id} data-testid="hdsp-todo-item" data-status={t.status ?? 'pending'}>
              <span aria-hidden="true">{ICONS[t.status ?? 'pending'] ?? '○'}</span> {t.content}
            </li>
          ))}
        </ul>
      ) : (
        <div className="hdsp-todo-editor">
          <textarea data-testid="hdsp-todo-text" value={draft} rows={Math.max(3, todos.length + 1)} onChange={e => setDraft(e.target.value)} />
          <button
            data-testid="hdsp-todo-save"
            className="jp-Button jp-mod-accept hdsp-button"
            onClick={() => {
              void props.onSave(draft).then(() => setDraft(null));
            }}
          >
            Save
          </button>
          <button className="jp-Button hdsp-button" onClick={() => setDraft(null)}>
            Cancel
          </button>
        </div>
      )}
    </div>
  );
}
