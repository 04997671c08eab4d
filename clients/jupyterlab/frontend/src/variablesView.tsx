/**
 * The variables view of the open task: the variables of the kernel its code runs
 * in (ListVariables, a silent inspection in the daemon), read again after each of
 * its executions and whenever that kernel goes idle (a cell the user ran in the
 * notebook). A busy kernel keeps the last list, with a note. The user's values
 * are shown as text only.
 */
import React, { useEffect, useState } from 'react';

import type { PanelModel } from './model';
import type { OpenTask } from './state';
import {
  applyListing,
  describeColumns,
  describeVariable,
  EMPTY_VIEW,
  executionKey,
  VariablesView
} from './variables';

export function Variables(props: { model: PanelModel; task: OpenTask }): JSX.Element {
  const { model, task } = props;
  const [view, setView] = useState<VariablesView>(EMPTY_VIEW);
  const [open, setOpen] = useState(true);
  const [tick, setTick] = useState(0);
  const taskId = task.taskId;
  const key = executionKey(task);
  const kernelId = view.taskId === taskId ? (view.listing?.kernelId ?? null) : null;

  useEffect(() => {
    let live = true;
    let retry: ReturnType<typeof setTimeout> | undefined;
    setView(v => ({ ...v, loading: true }));
    model.api
      .command({ commandName: 'ListVariables', taskId })
      .then(reply => {
        if (live) {
          setView(v => applyListing(v, taskId, reply));
          if (reply.status === 'busy') {
            // Code still runs (an execution's last output can come before its
            // kernel is idle): read again shortly, as the idle status may be
            // the event that came first.
            retry = setTimeout(() => setTick(t => t + 1), 1000);
          }
        }
      })
      .catch((error: unknown) => {
        if (live) {
          const note = error instanceof Error ? error.message : String(error);
          setView(v => ({ ...v, taskId, loading: false, note }));
        }
      });
    return () => {
      live = false;
      clearTimeout(retry);
    };
  }, [model, taskId, key, tick]);

  useEffect(
    () =>
      model.onEvent(event => {
        const data = event.data;
        if (
          kernelId !== null &&
          data.eventName === 'kernelStatus' &&
          data.payload[0] === kernelId &&
          data.payload[1] === 'idle'
        ) {
          setTick(t => t + 1);
        }
      }),
    [model, kernelId]
  );

  const variables = view.taskId === taskId ? (view.listing?.variables ?? []) : [];
  const omitted = view.taskId === taskId ? (view.listing?.omitted ?? 0) : 0;
  return (
    <div data-testid="hdsp-variables" className="hdsp-variables" data-loading={view.loading ? 'true' : 'false'}>
      <div className="hdsp-variables-head">
        <button className="hdsp-variables-toggle" onClick={() => setOpen(!open)} title="Show or hide the kernel's variables">
          {open ? '▾' : '▸'} Variables ({variables.length}
          {omitted ? `+${omitted}` : ''})
        </button>
        <button className="jp-Button hdsp-button" title="Read the kernel's variables again" onClick={() => setTick(t => t + 1)}>
          ⟳
        </button>
      </div>
      {open && view.note && <div className="hdsp-note">{view.note}</div>}
      {open && (
        <div className="hdsp-variables-list">
          {variables.map(v => (
            <details key={v.name} data-testid="hdsp-variable" data-name={v.name} className="hdsp-variable">
              <summary>
                <span className="hdsp-variable-name">{v.name}</span>{' '}
                <span className="hdsp-variable-facts">{describeVariable(v)}</span>
              </summary>
              {v.columns && v.columns.length > 0 && <div className="hdsp-variable-columns">{describeColumns(v)}</div>}
              {(v.head || v.preview) && <pre className="hdsp-variable-preview">{v.head || v.preview}</pre>}
              {v.error && <div className="hdsp-note">not shown: {v.error}</div>}
            </details>
          ))}
        </div>
      )}
    </div>
  );
}
