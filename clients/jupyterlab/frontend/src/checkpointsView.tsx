/**
 * The checkpoints view of the open task (issue 20): its checkpoints with what
 * changed at each, a readable diff of one against the files now, and restore
 * (files, history or both; with the kernel where the task had run code) after a
 * confirmation. A kernel replay's ask shows its cells here with approve/deny.
 * The list is read again on each `checkpointSaved`/`checkpointRestored` of the
 * task. Everything shown is text only.
 */
import React, { useEffect, useState } from 'react';

import {
  changedSummary,
  confirmText,
  diffLines,
  offersKernel,
  replayAskOf,
  restoreChoices,
  restoreData,
  RestorePlan,
  resultLines,
  touchesCheckpoints,
  when
} from './checkpoints';
import type { PanelModel } from './model';
import type { OpenTask } from './state';
import type { CheckpointDiff, CheckpointList } from './wire';

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function DiffView(props: { diff: CheckpointDiff }): JSX.Element {
  const files = props.diff.files ?? [];
  return (
    <div data-testid="hdsp-checkpoint-diff" className="hdsp-checkpoint-diff">
      <div className="hdsp-note">
        Checkpoint {props.diff.checkpoint} → {props.diff.to != null ? `checkpoint ${props.diff.to}` : 'the files now'}:{' '}
        {files.length ? `${files.length} file(s) differ` : 'no difference'}
      </div>
      {files.map(f => (
        <details key={f.path} open={files.length <= 3} className="hdsp-checkpoint-file" data-path={f.path}>
          <summary>
            <span className={`hdsp-checkpoint-status hdsp-checkpoint-${f.status}`}>{f.status}</span> {f.path}
            {f.notebook ? ' (notebook, cell by cell)' : ''}
          </summary>
          {f.binary ? (
            <div className="hdsp-note">binary file</div>
          ) : (
            <pre className="hdsp-diff">
              {diffLines(f.diff ?? '').map((line, i) => (
                <div key={i} className={`hdsp-diff-${line.kind}`}>
                  {line.text || ' '}
                </div>
              ))}
            </pre>
          )}
        </details>
      ))}
      {props.diff.nested && props.diff.nested.length > 0 && (
        <div className="hdsp-note">Not in checkpoints (git repositories of their own): {props.diff.nested.join(', ')}</div>
      )}
    </div>
  );
}

function Confirm(props: {
  plan: RestorePlan;
  nested: string[];
  onChange: (plan: RestorePlan) => void;
  onGo: () => void;
  onCancel: () => void;
  busy: boolean;
}): JSX.Element {
  const { plan } = props;
  const cp = plan.checkpoint;
  return (
    <div data-testid="hdsp-restore-confirm" className="hdsp-restore-confirm" role="dialog" aria-label={`Restore checkpoint ${cp.number}`}>
      <div className="hdsp-restore-modes">
        {restoreChoices(cp).map(choice => (
          <label key={choice.restore}>
            <input
              type="radio"
              name={`hdsp-restore-${cp.number}`}
              data-testid={`hdsp-restore-mode-${choice.restore}`}
              checked={plan.restore === choice.restore}
              onChange={() => props.onChange({ ...plan, restore: choice.restore })}
            />{' '}
            {choice.label}
          </label>
        ))}
        {offersKernel(cp) && (
          <label>
            <input
              type="checkbox"
              data-testid="hdsp-restore-kernel"
              checked={plan.withKernel}
              onChange={e => props.onChange({ ...plan, withKernel: e.target.checked })}
            />{' '}
            With kernel (replay {cp.executions} execution{cp.executions === 1 ? '' : 's'})
          </label>
        )}
      </div>
      {confirmText(plan, props.nested).map((line, i) => (
        <div key={i} className="hdsp-restore-text">
          {line}
        </div>
      ))}
      <button data-testid="hdsp-restore-go" className="jp-Button jp-mod-warn hdsp-button" disabled={props.busy} onClick={props.onGo}>
        Restore
      </button>
      <button className="jp-Button hdsp-button" onClick={props.onCancel}>
        Cancel
      </button>
    </div>
  );
}

export function Checkpoints(props: { model: PanelModel; task: OpenTask }): JSX.Element {
  const { model, task } = props;
  const taskId = task.taskId;
  const [open, setOpen] = useState(false);
  const [listing, setListing] = useState<CheckpointList | null>(null);
  const [tick, setTick] = useState(0);
  const [note, setNote] = useState<string | null>(null);
  const [diff, setDiff] = useState<CheckpointDiff | null>(null);
  const [plan, setPlan] = useState<RestorePlan | null>(null);
  const [busy, setBusy] = useState(false);
  const [outcome, setOutcome] = useState<string[] | null>(null);

  useEffect(() => {
    setListing(null);
    setDiff(null);
    setPlan(null);
    setOutcome(null);
  }, [taskId]);

  useEffect(() => {
    let live = true;
    model.api
      .command({ commandName: 'ListCheckpoints', data: { taskId } })
      .then(reply => {
        if (live) {
          setListing(reply);
          setNote(null);
        }
      })
      .catch((error: unknown) => live && setNote(message(error)));
    return () => {
      live = false;
    };
  }, [model, taskId, tick]);

  useEffect(
    () =>
      model.onEvent(event => {
        if (touchesCheckpoints(event.data.eventName, (event.data as { payload?: unknown }).payload, taskId)) {
          setTick(t => t + 1);
        }
      }),
    [model, taskId]
  );

  const showDiff = (number: number): void => {
    setPlan(null);
    setDiff(null);
    model.api
      .command({ commandName: 'DiffCheckpoints', data: { taskId, checkpoint: number } })
      .then(reply => setDiff(reply))
      .catch((error: unknown) => setNote(message(error)));
  };

  const restore = (chosen: RestorePlan): void => {
    setBusy(true);
    model.api
      .command({ commandName: 'RestoreCheckpoint', data: restoreData(taskId, chosen) })
      .then(result => {
        setOutcome(resultLines(result));
        setPlan(null);
        setDiff(null);
        setNote(null);
      })
      .catch((error: unknown) => setNote(message(error)))
      .finally(() => setBusy(false));
  };

  const checkpoints = listing?.taskId === taskId ? (listing.checkpoints ?? []) : [];
  const nested = listing?.nested ?? [];
  const replay = replayAskOf(task.pendingAsk);
  return (
    <div data-testid="hdsp-checkpoints" className="hdsp-checkpoints">
      <div className="hdsp-variables-head">
        <button
          data-testid="hdsp-checkpoints-toggle"
          className="hdsp-variables-toggle"
          onClick={() => setOpen(!open)}
          title="Show or hide the task's checkpoints: undo the agent's changes"
        >
          {open ? '▾' : '▸'} Checkpoints ({checkpoints.length})
        </button>
      </div>
      {replay && (
        <div data-testid="hdsp-replay-ask" className="hdsp-replay-ask">
          <div className="hdsp-restore-text">
            {replay.checkpoint != null ? `Checkpoint ${replay.checkpoint}: ` : ''}
            {replay.note}
          </div>
          {replay.cells.length === 0 && <div className="hdsp-note">No code to run again: the kernel only restarts.</div>}
          {replay.cells.map(cell => (
            <div key={cell.seq} className="hdsp-replay-cell" data-seq={cell.seq}>
              <div className="hdsp-note">
                execution {cell.seq}
                {cell.skip ? ` (${cell.skip})` : ''}
              </div>
              <pre className="hdsp-code">{cell.code}</pre>
            </div>
          ))}
          <button
            data-testid="hdsp-replay-approve"
            className="jp-Button jp-mod-accept hdsp-button"
            onClick={() => void model.respond(replay.ts, 'yesButtonClicked')}
          >
            Replay
          </button>
          <button
            data-testid="hdsp-replay-deny"
            className="jp-Button hdsp-button"
            onClick={() => void model.respond(replay.ts, 'noButtonClicked')}
          >
            Don't replay
          </button>
        </div>
      )}
      {open && listing?.note && <div className="hdsp-note">{listing.note}</div>}
      {open && note && (
        <div className="hdsp-error" role="alert">
          {note}
        </div>
      )}
      {open && outcome && (
        <div data-testid="hdsp-restore-result" className="hdsp-note">
          {outcome.map((line, i) => (
            <div key={i}>{line}</div>
          ))}
        </div>
      )}
      {open && (
        <div className="hdsp-checkpoints-list">
          {checkpoints.length === 0 && <div className="hdsp-note">No checkpoints yet: one is taken before each change the agent makes.</div>}
          {[...checkpoints].reverse().map(cp => (
            <div key={cp.number} data-testid="hdsp-checkpoint" data-number={cp.number} className="hdsp-checkpoint-row">
              <div className="hdsp-checkpoint-line">
                <span className="hdsp-checkpoint-number">#{cp.number}</span> <span>{cp.reason}</span>{' '}
                <span className="hdsp-checkpoint-when">{when(cp.ts)}</span>
              </div>
              <div className="hdsp-checkpoint-changed">{changedSummary(cp)}</div>
              {(cp.notes ?? []).map((n, i) => (
                <div key={i} className="hdsp-note">
                  {n}
                </div>
              ))}
              <button data-testid="hdsp-checkpoint-diff-button" className="jp-Button hdsp-button" onClick={() => showDiff(cp.number)}>
                Diff with now
              </button>
              <button
                data-testid="hdsp-checkpoint-restore"
                className="jp-Button hdsp-button"
                onClick={() => {
                  setDiff(null);
                  setOutcome(null);
                  setPlan({ checkpoint: cp, restore: 'files', withKernel: false });
                }}
              >
                Restore…
              </button>
              {plan?.checkpoint.number === cp.number && (
                <Confirm plan={plan} nested={nested} busy={busy} onChange={setPlan} onGo={() => restore(plan)} onCancel={() => setPlan(null)} />
              )}
              {diff?.checkpoint === cp.number && <DiffView diff={diff} />}
            </div>
          ))}
          {nested.length > 0 && (
            <div data-testid="hdsp-checkpoints-nested" className="hdsp-note">
              Not in checkpoints, never restored (git repositories of their own): {nested.join(', ')}
            </div>
          )}
        </div>
      )}
    </div>
  );
}
