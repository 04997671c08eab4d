/**
 * The panel's controls for long sessions (issue 19): on each message the
 * history actions that apply to it (edit and resend, rewind to here, fork from
 * here, delete), each destructive one confirmed first; the condense and
 * truncation markers with their before/after token counts; the Condense button;
 * and the choice between steering the running turn and queueing.
 */
import React, { useState } from 'react';

import {
  ACTION_WORDS,
  actionsFor,
  confirmation,
  contextMarkerOf,
  deletedKind,
  HistoryAction,
  isDestructive,
  markerText
} from './history';
import type { PanelModel } from './model';
import type { OpenTask } from './state';
import type { ClineMessage } from './wire';

/** How many messages of `task` come after `ts`. */
function laterCount(task: OpenTask, ts: number): number {
  const i = task.order.indexOf(ts);
  return i < 0 ? 0 : task.order.length - i - 1;
}

export function MessageActions(props: {
  model: PanelModel;
  message: ClineMessage;
  task: OpenTask;
  isPrompt: boolean;
}): JSX.Element | null {
  const { model, message, task } = props;
  const [pending, setPending] = useState<HistoryAction | null>(null);
  const [draft, setDraft] = useState('');
  const [busy, setBusy] = useState(false);
  const actions = actionsFor(message, {
    isPrompt: props.isPrompt,
    waitingAsk: task.pendingAsk?.ts === message.ts
  });
  if (actions.length === 0) {
    return null;
  }
  const run = (action: HistoryAction): void => {
    setBusy(true);
    const done = (): void => {
      setBusy(false);
      setPending(null);
    };
    switch (action) {
      case 'edit':
        void model.editMessage(message.ts, draft).finally(done);
        break;
      case 'rewind':
        void model.rewind(message.ts, false).finally(done);
        break;
      case 'delete':
        void model.deleteMessage(message.ts).finally(done);
        break;
      case 'fork':
        void model.fork(message.ts).finally(done);
        break;
    }
  };
  const choose = (action: HistoryAction): void => {
    if (action === 'edit') {
      setDraft(message.text ?? '');
    }
    if (isDestructive(action)) {
      setPending(action);
    } else {
      run(action);
    }
  };
  return (
    <div className="hdsp-history">
      <div className="hdsp-history-actions">
        {actions.map(action => (
          <button
            key={action}
            data-testid="hdsp-message-action"
            data-action={action}
            className="jp-Button hdsp-button hdsp-history-button"
            title={ACTION_WORDS[action].title}
            disabled={busy}
            onClick={() => choose(action)}
          >
            {ACTION_WORDS[action].label}
          </button>
        ))}
      </div>
      {pending !== null && (
        <div data-testid="hdsp-confirm" data-action={pending} className="hdsp-confirm" role="alertdialog">
          {pending === 'edit' && (
            <textarea
              data-testid="hdsp-edit-text"
              className="hdsp-prompt"
              rows={3}
              value={draft}
              onChange={e => setDraft(e.target.value)}
            />
          )}
          <div className="hdsp-note">{confirmation(pending, laterCount(task, message.ts), deletedKind(message, props.isPrompt) ?? 'mine')}</div>
          <button
            data-testid="hdsp-confirm-yes"
            className="jp-Button jp-mod-warn hdsp-button"
            disabled={busy || (pending === 'edit' && !draft.trim())}
            onClick={() => run(pending)}
          >
            {pending === 'edit' ? 'Resend' : ACTION_WORDS[pending].label}
          </button>
          <button data-testid="hdsp-confirm-no" className="jp-Button hdsp-button" disabled={busy} onClick={() => setPending(null)}>
            Cancel
          </button>
        </div>
      )}
    </div>
  );
}

/** A condense or truncation marker, with the request's tokens before and after. */
export function ContextMarkerView(props: { message: ClineMessage }): JSX.Element | null {
  const marker = contextMarkerOf(props.message);
  if (marker === null) {
    return null;
  }
  return (
    <div
      data-testid="hdsp-context-marker"
      data-kind={marker.kind}
      data-before={marker.before ?? ''}
      data-after={marker.after ?? ''}
      className={`hdsp-context-marker hdsp-context-${marker.kind}`}
    >
      <div className="hdsp-note">{markerText(marker)}</div>
      {marker.summary && (
        <details className="hdsp-summary">
          <summary>Summary</summary>
          <div className="hdsp-summary-text">{marker.summary}</div>
        </details>
      )}
    </div>
  );
}

/** Condense the open task's conversation now. */
export function CondenseButton(props: { model: PanelModel; working: boolean }): JSX.Element {
  const [busy, setBusy] = useState(false);
  return (
    <button
      data-testid="hdsp-condense"
      className="jp-Button hdsp-button"
      disabled={busy || props.working}
      title={
        props.working
          ? 'Condense when the turn is over (hdsp condenses by itself when the context fills up)'
          : 'Summarise the older part of the conversation: the model is sent the summary instead (the history keeps everything)'
      }
      onClick={() => {
        setBusy(true);
        void props.model.condense().finally(() => setBusy(false));
      }}
    >
      Condense
    </button>
  );
}

/** Steer the running turn with the next message, or queue it (offered while a turn runs). */
export function DeliveryChoice(props: { steer: boolean; onChange: (steer: boolean) => void }): JSX.Element {
  return (
    <label
      className="hdsp-steer"
      title="Steer: the message joins the running turn before its next model request. Otherwise it waits in the queue until the turn ends."
    >
      <input
        data-testid="hdsp-steer"
        type="checkbox"
        checked={props.steer}
        onChange={e => props.onChange(e.target.checked)}
      />
      Steer the running turn
    </label>
  );
}
