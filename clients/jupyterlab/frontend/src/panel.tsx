/**
 * The panel's React view. It reads the model's state and calls its commands;
 * the `data-testid`s are the page's contract with the browser tests
 * (clients/jupyterlab/CONTRACT.md). Model text and kernel output go through
 * JupyterLab's rendermime as untrusted (sanitized HTML, no script); everything
 * else from the daemon is shown as text.
 */
import { MimeModel, IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { Widget } from '@lumino/widgets';
import React, { useEffect, useLayoutEffect, useMemo, useRef, useState, useSyncExternalStore } from 'react';

import { ContextChips, MessageContext, NotebookContextSource, usePromptContext } from './contextChips';
import { APPROVAL_SWITCHES, ApprovalKey, PanelModel } from './model';
import { CondenseButton, ContextMarkerView, DeliveryChoice, MessageActions } from './HistoryActions';
import { Checkpoints } from './checkpointsView';
import { canSteer } from './history';
import {
  answeredBy,
  blobImage,
  cellOf,
  fence,
  imageSrc,
  outputBundle,
  QUIET_SAYS,
  STATE_WORDS,
  toolOf,
  toolResultOf,
  verdict
} from './messages';
import { descendants, filterTasks, messagesOf, OpenTask, taskTree, TaskRow, ViewState } from './state';
import { TodoList } from './todo';
import { Variables } from './variablesView';
import type { ClineMessage, KernelOutput } from './wire';

interface Props {
  model: PanelModel;
  rendermime: IRenderMimeRegistry;
  /** The active notebook's context for the prompt's chips (none outside Lab). */
  notebooks?: NotebookContextSource | null;
}

const Ctx = React.createContext<Props | null>(null);

function useProps(): Props {
  const props = React.useContext(Ctx);
  if (props === null) {
    throw new Error('hdsp panel: no context');
  }
  return props;
}

// ---- rendermime ----------------------------------------------------------------

/** A mime bundle rendered by rendermime, untrusted. */
function MimeView(props: { bundle: Record<string, unknown>; className?: string }): JSX.Element | null {
  const { rendermime, model } = useProps();
  const host = useRef<HTMLDivElement>(null);
  const blob = blobImage(props.bundle);
  const mimeType = blob ? null : rendermime.preferredMimeType(props.bundle as never, 'ensure');
  const text = JSON.stringify(props.bundle);
  // A layout effect: its cleanup runs while the host is still in the page. When a
  // rewind or a deletion takes messages away, React removes their DOM first and
  // runs passive cleanups after, and Lumino refuses to detach (or dispose) a
  // widget whose node left the page: "Widget is not attached", which unmounted
  // the whole panel.
  useLayoutEffect(() => {
    if (!mimeType || !host.current) {
      return;
    }
    const renderer = rendermime.createRenderer(mimeType);
    Widget.attach(renderer, host.current);
    void renderer.renderModel(
      new MimeModel({ data: JSON.parse(text), trusted: false })
    );
    return () => {
      if (renderer.isAttached) {
        Widget.detach(renderer);
      }
      renderer.dispose();
    };
  }, [mimeType, text]);
  if (blob) {
    return (
      <div className={props.className}>
        <img src={model.api.blobUrl(blob.sha256)} alt="output image" />
      </div>
    );
  }
  if (!mimeType) {
    return <div className={props.className}>[{Object.keys(props.bundle).join(', ') || 'no output'}]</div>;
  }
  return <div className={props.className} ref={host} />;
}

function Markdown(props: { text: string; className?: string }): JSX.Element {
  return <MimeView bundle={{ 'text/markdown': props.text }} className={props.className} />;
}

function Code(props: { code: string; language?: string }): JSX.Element {
  return <Markdown text={fence(props.code, props.language)} className="hdsp-code" />;
}

function Outputs(props: { outputs: KernelOutput[] }): JSX.Element {
  return (
    <div data-testid="hdsp-output" className="hdsp-output">
      {props.outputs.map((o, i) => (
        <MimeView
          key={i}
          bundle={outputBundle(o)}
          className={o.outputType === 'error' || o.name === 'stderr' ? 'hdsp-output-error' : undefined}
        />
      ))}
    </div>
  );
}

// ---- pieces --------------------------------------------------------------------

function Diff(props: { diff: string }): JSX.Element {
  return (
    <pre data-testid="hdsp-diff" className="hdsp-diff">
      {props.diff.split('\n').map((line, i) => {
        let cls = '';
        if (line.startsWith('+') && !line.startsWith('+++')) {
          cls = 'hdsp-diff-add';
        } else if (line.startsWith('-') && !line.startsWith('---')) {
          cls = 'hdsp-diff-del';
        } else if (line.startsWith('@@')) {
          cls = 'hdsp-diff-hunk';
        }
        return (
          <div key={i} className={cls}>
            {line || ' '}
          </div>
        );
      })}
    </pre>
  );
}

function ToolCard(props: { message: ClineMessage; auto: boolean }): JSX.Element {
  const tool = toolOf(props.message);
  if (tool === null) {
    return <div className="hdsp-tool-card">{props.message.text}</div>;
  }
  const args = Object.keys(tool.args).length ? JSON.stringify(tool.args) : '';
  return (
    <div data-testid="hdsp-tool-card" data-tool={tool.tool} className="hdsp-tool-card">
      <div className="hdsp-tool-head">
        <span className="hdsp-tool-name">{tool.tool}</span>
        {tool.path && <span className="hdsp-tool-path">{tool.path}</span>}
        {props.auto && <span className="hdsp-tool-auto">auto-approved</span>}
        {props.message.isProtected && <span className="hdsp-tool-auto">protected path</span>}
      </div>
      {args && <div className="hdsp-tool-args">{args}</div>}
      {tool.command && <pre className="hdsp-command">$ {tool.command}</pre>}
      {/* An auto-approved run shows its code in the cell card that follows. */}
      {tool.code && !(props.auto && tool.tool === 'execute_code') && <Code code={tool.code} />}
      {tool.diff ? (
        <Diff diff={tool.diff} />
      ) : (
        tool.content !== null && <pre className="hdsp-content">{tool.content}</pre>
      )}
    </div>
  );
}

function CommandCard(props: { message: ClineMessage }): JSX.Element {
  return (
    <div data-testid="hdsp-tool-card" data-tool="execute_command" className="hdsp-tool-card">
      <div className="hdsp-tool-head">
        <span className="hdsp-tool-name">command</span>
        {props.message.cwd && <span className="hdsp-tool-path">in {props.message.cwd}</span>}
      </div>
      <pre className="hdsp-command">$ {props.message.text}</pre>
    </div>
  );
}

/** What a tool call gave back, under the call (as `hdsp show`'s `→` line):
 * plain text, folded past FOLD_LINES lines, red when it is an error. */
function ToolResult(props: { message: ClineMessage }): JSX.Element {
  const r = toolResultOf(props.message);
  return (
    <div
      data-testid="hdsp-tool-result"
      data-tool={r.tool}
      className={`hdsp-tool-result${r.isError ? ' hdsp-tool-result-error' : ''}`}
    >
      <pre className="hdsp-tool-result-text">{'→ ' + r.head}</pre>
      {r.more && (
        <details>
          <summary>{r.more.split('\n').length} more lines</summary>
          <pre className="hdsp-tool-result-text">{r.more}</pre>
        </details>
      )}
      {r.notes.map(note => (
        <div key={note} className="hdsp-note">
          {note}
        </div>
      ))}
    </div>
  );
}

function CellCard(props: { message: ClineMessage; task: OpenTask }): JSX.Element {
  const cell = cellOf(props.message);
  if (cell === null) {
    return <pre>{props.message.text}</pre>;
  }
  const live = cell.executionId ? props.task.outputs[cell.executionId] : undefined;
  // The live stream holds every output uncut; the message's own list is cut.
  const outputs = live !== undefined && (cell.status === 'running' || cell.omitted > 0) ? live : cell.outputs;
  return (
    <div data-testid="hdsp-tool-card" data-tool="execute_code" className="hdsp-tool-card hdsp-cell">
      <div className="hdsp-tool-head">
        <span className="hdsp-tool-name">In [{cell.executionCount ?? ' '}]</span>
        <span className={`hdsp-cell-status hdsp-cell-${cell.status}`}>{cell.status}</span>
      </div>
      <Code code={cell.code} />
      <Outputs outputs={outputs} />
      {cell.omitted > 0 && live === undefined && (
        <div className="hdsp-note">[{cell.omitted.toLocaleString()} characters not kept]</div>
      )}
      {cell.kernelRestarted && <div className="hdsp-note">The kernel restarted: its variables are gone.</div>}
    </div>
  );
}

function Images(props: { images: string[] | null | undefined }): JSX.Element | null {
  const { model } = useProps();
  if (!props.images || props.images.length === 0) {
    return null;
  }
  return (
    <div className="hdsp-images">
      {props.images.map((img, i) => {
        const src = imageSrc(img, sha => model.api.blobUrl(sha));
        return src ? <img key={i} src={src} alt="image" /> : null;
      })}
    </div>
  );
}

function AskSummary(props: { message: ClineMessage }): JSX.Element {
  const m = props.message;
  const kind = m.ask ?? '';
  if (kind === 'command') {
    return (
      <>
        <div className="hdsp-ask-title">Run this command?</div>
        <CommandCard message={m} />
      </>
    );
  }
  if (kind === 'followup') {
    const data = (() => {
      try {
        return JSON.parse(m.text ?? '');
      } catch {
        return null;
      }
    })();
    return <Markdown text={String(data?.question ?? m.text ?? '')} />;
  }
  if (toolOf(m) !== null) {
    return (
      <>
        <div className="hdsp-ask-title">Allow this?</div>
        <ToolCard message={m} auto={false} />
      </>
    );
  }
  if (kind === 'api_req_failed') {
    return <div className="hdsp-ask-title">The model request failed; retry? {m.text}</div>;
  }
  if (kind === 'resume_task' || kind === 'resume_completed_task') {
    return <div className="hdsp-ask-title">Resume the task?</div>;
  }
  return (
    <div className="hdsp-ask-title">
      {kind}: {m.text}
    </div>
  );
}

function MessageView(props: { message: ClineMessage; task: OpenTask; prompt: boolean }): JSX.Element | null {
  const { model } = useProps();
  const m = props.message;
  const actions = <MessageActions model={model} message={m} task={props.task} isPrompt={props.prompt} />;
  const common = {
    'data-testid': 'hdsp-message',
    'data-ts': String(m.ts),
    'data-type': m.type,
    'data-partial': m.partial ? 'true' : 'false',
    ...(m.type === 'ask' ? { 'data-ask': m.ask ?? '' } : { 'data-say': m.say ?? '' })
  };
  if (m.type === 'ask') {
    const answered = m.isAnswered ? (
      <div data-testid="hdsp-ask-answered" className="hdsp-ask-answered">
        {verdict(m.answer)}
        {answeredBy(m)}
      </div>
    ) : null;
    if (m.ask === 'command_output') {
      return (
        <div {...common} className="hdsp-message">
          <pre className="hdsp-command-output">{m.text}</pre>
        </div>
      );
    }
    if (m.ask === 'completion_result' && !m.text) {
      return null;
    }
    // Every ask that waits (concurrent calls ask together) has its buttons.
    const waiting = props.task.waitingAsks.find(a => a.ts === m.ts);
    return (
      <div {...common} className="hdsp-message hdsp-message-ask">
        {/* An ask that waits shows once, with its buttons, where it was asked. */}
        {waiting ? <AskBox key={m.ts} ask={waiting} /> : <AskSummary message={m} />}
        {answered}
        {actions}
      </div>
    );
  }
  const say = m.say ?? '';
  if (QUIET_SAYS.has(say) || say === 'api_req_retry_delayed') {
    return null; // bookkeeping (the retry countdown shows in the header)
  }
  let body: React.ReactNode;
  switch (say) {
    case 'text':
      body = props.prompt ? (
        <div className="hdsp-user">
          <MessageContext context={m.context} />
          {m.text}
        </div>
      ) : (
        <Markdown text={m.text ?? ''} className="hdsp-text" />
      );
      break;
    case 'user_feedback':
      body = (
        <div className="hdsp-user">
          <MessageContext context={m.context} />
          {m.text}
        </div>
      );
      break;
    case 'reasoning':
      body = (
        <details className="hdsp-reasoning">
          <summary>{m.partial ? 'Thinking…' : 'Reasoning'}</summary>
          <div className="hdsp-reasoning-text">{m.text}</div>
        </details>
      );
      break;
    case 'tool':
      body = <ToolCard message={m} auto={true} />;
      break;
    case 'command_output':
      body = <pre className="hdsp-command-output">{m.text}</pre>;
      break;
    case 'tool_result':
      body = <ToolResult message={m} />;
      break;
    case 'cell_output':
      body = <CellCard message={m} task={props.task} />;
      break;
    case 'completion_result':
      body = (
        <div className="hdsp-result">
          <div className="hdsp-result-head">Result</div>
          <Markdown text={m.text ?? ''} />
        </div>
      );
      break;
    case 'error':
      body = (
        <div data-testid="hdsp-error" className="hdsp-error">
          {m.text}
        </div>
      );
      break;
    case 'sliding_window_truncation':
    case 'condense_context':
    case 'condense_context_error':
      body = <ContextMarkerView message={m} />;
      break;
    case 'checkpoint_saved':
    case 'checkpoint_restored':
      // Checkpoints (issue 20): one line; `hdsp diff` / `hdsp restore` act on them.
      body = <div className="hdsp-note hdsp-checkpoint">{m.text}</div>;
      break;
    case 'kernel_culled':
    case 'notebook_kernel':
      body = <div className="hdsp-note">{m.text || 'The kernel was shut down after being idle.'}</div>;
      break;
    case 'image':
      body = null;
      break;
    default:
      body = (
        <div className="hdsp-note">
          [{say}] {m.text}
        </div>
      );
  }
  return (
    <div {...common} className={`hdsp-message hdsp-say-${say}`}>
      {body}
      <Images images={m.images} />
      {actions}
    </div>
  );
}

/** An ask with its buttons; `taskId`: an agent's task whose ask shows in its caller's view. */
function AskBox(props: { ask: ClineMessage; taskId?: string }): JSX.Element {
  const { model } = useProps();
  const [reason, setReason] = useState('');
  const [busy, setBusy] = useState(false);
  const ask = props.ask;
  const followup = ask.ask === 'followup';
  const suggestions: string[] = useMemo(() => {
    if (!followup) {
      return [];
    }
    try {
      const data = JSON.parse(ask.text ?? '');
      return Array.isArray(data?.suggest)
        ? data.suggest.map((s: unknown) => (typeof s === 'string' ? s : String((s as { answer?: string })?.answer ?? '')))
        : [];
    } catch {
      return [];
    }
  }, [ask.text, followup]);
  const run = (response: 'yesButtonClicked' | 'noButtonClicked' | 'messageResponse', text?: string) => {
    setBusy(true);
    void model.respond(ask.ts, response, text, props.taskId).finally(() => setBusy(false));
  };
  const approve = () => run('yesButtonClicked');
  const deny = () => run('noButtonClicked', reason);
  const answer = (text: string) => run('messageResponse', text);
  const onKey = (e: React.KeyboardEvent) => {
    const inField = (e.target as HTMLElement).tagName === 'TEXTAREA';
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      approve();
    } else if (inField && e.key === 'Enter' && !e.shiftKey) {
      e.preventDefault();
      if (followup) {
        answer(reason);
      } else {
        deny();
      }
    } else if (!inField && (e.key === 'y' || e.key === 'Y')) {
      e.preventDefault();
      approve();
    } else if (!inField && (e.key === 'n' || e.key === 'N')) {
      e.preventDefault();
      deny();
    }
  };
  return (
    <div
      data-testid="hdsp-ask"
      data-ask-ts={String(ask.ts)}
      data-task-id={props.taskId ?? ''}
      data-ask={ask.ask ?? ''}
      className="hdsp-ask"
      tabIndex={0}
      onKeyDown={onKey}
    >
      <AskSummary message={ask} />
      {suggestions.length > 0 && (
        <div className="hdsp-suggestions">
          {suggestions.map((s, i) => (
            <button key={i} className="jp-Button hdsp-button" disabled={busy} onClick={() => answer(s)}>
              {s}
            </button>
          ))}
        </div>
      )}
      <textarea
        data-testid="hdsp-deny-reason"
        className="hdsp-reason"
        rows={2}
        value={reason}
        placeholder={followup ? 'Your answer (Enter sends)' : 'Why not? (optional; Enter denies with it)'}
        onChange={e => setReason(e.target.value)}
      />
      <div className="hdsp-ask-buttons">
        {followup && (
          <button className="jp-Button hdsp-button" disabled={busy || !reason.trim()} onClick={() => answer(reason)}>
            Answer
          </button>
        )}
        <button
          data-testid="hdsp-approve"
          className="jp-Button jp-mod-accept hdsp-button"
          disabled={busy}
          title="Approve (Y, or Ctrl+Enter)"
          onClick={approve}
        >
          {followup ? 'Yes' : 'Approve'}
        </button>
        <button
          data-testid="hdsp-deny"
          className="jp-Button jp-mod-warn hdsp-button"
          disabled={busy}
          title="Deny, with the reason if one is written (N)"
          onClick={deny}
        >
          {reason.trim() && !followup ? 'Deny with reason' : followup ? 'No' : 'Deny'}
        </button>
      </div>
    </div>
  );
}

// ---- the big parts -------------------------------------------------------------

function ConnectionBanner(props: { state: ViewState }): JSX.Element {
  const c = props.state.connection;
  return (
    <div data-testid="hdsp-connection" data-state={c.state === 'connecting' ? 'reconnecting' : c.state} className={`hdsp-connection hdsp-connection-${c.state}`}>
      {c.text}
    </div>
  );
}

function TaskList(props: { state: ViewState }): JSX.Element {
  const { model } = useProps();
  const [query, setQuery] = useState('');
  const tasks = taskTree(filterTasks(props.state.tasks, query));
  const openId = props.state.open?.taskId;
  const asks = props.state.asks;
  return (
    <div className="hdsp-tasks">
      <input
        data-testid="hdsp-task-search"
        className="hdsp-search"
        type="search"
        placeholder="Search tasks"
        value={query}
        onChange={e => setQuery(e.target.value)}
      />
      <ul data-testid="hdsp-task-list" className="hdsp-task-list">
        {tasks.map(({ row: t, depth }) => (
          <li
            key={t.id}
            data-testid="hdsp-task-item"
            data-task-id={t.id}
            data-state={t.state ?? ''}
            data-depth={String(depth)}
            data-parent-id={t.parentTaskId ?? ''}
            className={`hdsp-task-item${t.id === openId ? ' hdsp-selected' : ''}`}
            style={depth > 0 ? { paddingLeft: `${0.5 + 1.1 * Math.min(depth, 8)}em` } : undefined}
            onClick={() => void model.openTask(t.id)}
            title={t.workspace ?? ''}
          >
            {depth > 0 && <span className="hdsp-tree-branch">↳</span>}
            <span className={`hdsp-badge hdsp-badge-${t.state ?? 'unknown'}`}>{t.state ?? '…'}</span>
            <span className="hdsp-task-number">{t.number ? `#${t.number}` : ''}</span>
            {t.agent && <AgentLabel name={t.agent} />}
            <span className="hdsp-task-text">{t.task || t.id.slice(0, 8)}</span>
            {(asks[t.id]?.length ?? 0) > 0 && (
              <span data-testid="hdsp-task-asks" className="hdsp-task-asks" title="Waits for your answer">
                {asks[t.id].length} ask{asks[t.id].length > 1 ? 's' : ''}
              </span>
            )}
          </li>
        ))}
        {tasks.length === 0 && <li className="hdsp-note">{query ? 'No task matches.' : 'No tasks yet.'}</li>}
      </ul>
    </div>
  );
}

/** An agent's name (seed 002), as a label. */
function AgentLabel(props: { name: string }): JSX.Element {
  return (
    <span data-testid="hdsp-agent" className="hdsp-agent" title="The agent that works on this task">
      {props.name}
    </span>
  );
}

/**
 * The open task's agents (seed 002): the tasks it called, with their state and
 * what they returned, and the asks that wait anywhere below it, answered here.
 */
function AgentTree(props: { state: ViewState; task: OpenTask }): JSX.Element | null {
  const { model } = useProps();
  const below = descendants(props.state.tasks, props.task.taskId);
  if (below.length === 0) {
    return null;
  }
  const waiting = below.filter(r => (props.state.asks[r.row.id]?.length ?? 0) > 0);
  return (
    <div data-testid="hdsp-agents" className="hdsp-agents">
      <div className="hdsp-section-title">Agents it called</div>
      <ul className="hdsp-agent-list">
        {below.map(({ row, depth }) => (
          <li
            key={row.id}
            data-testid="hdsp-agent-task"
            data-task-id={row.id}
            data-depth={String(depth)}
            className="hdsp-agent-task"
            style={{ paddingLeft: `${1.1 * (Math.min(depth, 8) - 1)}em` }}
          >
            <button className="hdsp-link" title="Open this agent's task" onClick={() => void model.openTask(row.id)}>
              <span className={`hdsp-badge hdsp-badge-${row.state ?? 'unknown'}`}>{row.state ?? '…'}</span>
              {row.agent && <AgentLabel name={row.agent} />}
              <span className="hdsp-task-text">{row.task || row.id.slice(0, 8)}</span>
            </button>
            {row.result !== null && row.result !== undefined && (
              <div data-testid="hdsp-agent-result" className="hdsp-agent-result">
                returned: {row.result}
              </div>
            )}
          </li>
        ))}
      </ul>
      {waiting.map(({ row }) =>
        props.state.asks[row.id].map(ask => (
          <div key={`${row.id}:${ask.ts}`} data-testid="hdsp-agent-ask" data-task-id={row.id} className="hdsp-agent-ask">
            <div className="hdsp-agent-ask-who">
              <AgentLabel name={row.agent ?? 'an agent'} /> asks
            </div>
            <AskBox ask={ask} taskId={row.id} />
          </div>
        ))
      )}
    </div>
  );
}

function TaskHeader(props: { task: OpenTask; row: TaskRow | undefined; parent: TaskRow | undefined }): JSX.Element {
  const { model } = useProps();
  const t = props.task;
  const state = t.state ?? props.row?.state ?? null;
  const usage = t.usage;
  const tokensIn = usage?.totalTokensIn ?? props.row?.tokensIn ?? 0;
  const tokensOut = usage?.totalTokensOut ?? props.row?.tokensOut ?? 0;
  const cost = usage?.totalCost ?? props.row?.totalCost ?? 0;
  // (paused: it waits for the agents it called, which Stop stops too.)
  const live = state === 'running' || state === 'interactive' || state === 'paused';
  const resumable = state === 'resumable' || state === 'aborted' || state === 'completed' || state === 'idle';
  return (
    <div className="hdsp-task-header">
      <div className="hdsp-task-title">
        <span data-testid="hdsp-task-state" className={`hdsp-badge hdsp-badge-${state ?? 'unknown'}`} title={STATE_WORDS[state ?? ''] ?? ''}>
          {state ?? '…'}
        </span>
        {props.row?.agent && <AgentLabel name={props.row.agent} />}
        <span className="hdsp-task-text">{props.row?.task ?? ''}</span>
      </div>
      {props.row?.parentTaskId && (
        <div className="hdsp-called-by">
          called by{' '}
          <button data-testid="hdsp-parent-link" className="hdsp-link" onClick={() => void model.openTask(props.row!.parentTaskId!)}>
            {props.parent?.agent ? `${props.parent.agent} ` : ''}
            {props.parent?.number ? `#${props.parent.number}` : props.row.parentTaskId.slice(0, 8)}
          </button>
        </div>
      )}
      <div className="hdsp-task-meta">
        <span data-testid="hdsp-tokens">
          {tokensIn.toLocaleString()} in · {tokensOut.toLocaleString()} out
        </span>
        <span data-testid="hdsp-cost">${cost.toFixed(4)}</span>
        {live && (
          <button data-testid="hdsp-stop" className="jp-Button jp-mod-warn hdsp-button" onClick={() => void model.stop()} title="Cancel the task and interrupt its code">
            Stop
          </button>
        )}
        {resumable && (
          <button className="jp-Button hdsp-button" onClick={() => void model.resume()} title="Continue the task where it stopped">
            Resume
          </button>
        )}
        <CondenseButton model={model} working={live} />
        <button className="jp-Button hdsp-button" onClick={() => void model.close()} title="Close: stop it and let go of its kernel (the history stays)">
          Close
        </button>
      </div>
      {t.retry && (
        <div data-testid="hdsp-retry" className="hdsp-retry">
          {t.retry.problem} — retry {t.retry.attempt ?? ''} in {t.retry.secondsLeft ?? '?'} s
        </div>
      )}
      {t.waiting && <div className="hdsp-note">{t.waiting}</div>}
    </div>
  );
}

function Conversation(props: { task: OpenTask }): JSX.Element {
  const end = useRef<HTMLDivElement>(null);
  const messages = messagesOf(props.task);
  const firstText = messages.find(m => m.type === 'say' && m.say === 'text')?.ts;
  const count = messages.length;
  const lastText = messages[count - 1]?.text?.length ?? 0;
  useEffect(() => {
    end.current?.scrollIntoView?.({ block: 'end' });
  }, [count, lastText, props.task.pendingAsk?.ts]);
  return (
    <div data-testid="hdsp-conversation" className="hdsp-conversation">
      {!props.task.loaded && count === 0 && <div className="hdsp-note">Loading…</div>}
      {messages.map(m => (
        <MessageView key={m.ts} message={m} task={props.task} prompt={m.ts === firstText} />
      ))}
      {props.task.waitingAsks
        .filter(a => props.task.messages[a.ts] === undefined)
        .map(a => (
          <AskBox key={a.ts} ask={a} />
        ))}
      <Queue task={props.task} />
      <div ref={end} />
    </div>
  );
}

function Queue(props: { task: OpenTask }): JSX.Element | null {
  const { model } = useProps();
  if (props.task.queue.length === 0) {
    return null;
  }
  return (
    <div className="hdsp-queue">
      <div className="hdsp-note">Queued for when the current turn ends:</div>
      {props.task.queue.map(q => (
        <div key={q.id} data-testid="hdsp-queued-item" className="hdsp-queued-item">
          <span>{q.text}</span>
          <button data-testid="hdsp-queued-delete" className="jp-Button hdsp-button" title="Delete this queued message" onClick={() => void model.deleteQueued(q.id)}>
            ✕
          </button>
        </div>
      ))}
    </div>
  );
}

function Composer(props: { state: ViewState }): JSX.Element {
  const { model, notebooks } = useProps();
  const promptContext = usePromptContext(notebooks ?? null);
  const [text, setText] = useState('');
  const [sending, setSending] = useState(false);
  const [profile, setProfile] = useState<string | null>(model.profile);
  const [approvals, setApprovals] = useState(model.approvals);
  const [steer, setSteer] = useState(false);
  const open = props.state.open;
  const steerable = open !== null && canSteer(open.state);
  const profiles = props.state.profiles;
  const send = () => {
    if (!text.trim() || sending) {
      return;
    }
    setSending(true);
    void model.send(
      text,
      steerable && steer ? 'steer' : 'queue',
      promptContext.context,
      notebooks?.kernelId() ?? null
    ).then(ok => {
      setSending(false);
      if (ok) {
        setText('');
        promptContext.reset();
      }
    });
  };
  return (
    <div className="hdsp-composer">
      {open === null && (
        <div className="hdsp-options">
          <label className="hdsp-profile-label">
            Profile{' '}
            <select
              data-testid="hdsp-profile"
              value={profile ?? ''}
              onChange={e => {
                const name = e.target.value || null;
                setProfile(name);
                model.setProfile(name);
              }}
            >
              <option value="">{profiles?.current ? `current (${profiles.current})` : 'current'}</option>
              {(profiles?.profiles ?? []).map(p => (
                <option key={p.name} value={p.name}>
                  {p.name} — {p.provider} {p.model}
                </option>
              ))}
            </select>
          </label>
          <div data-testid="hdsp-auto-approve" className="hdsp-auto-approve" title="What this new task may do without asking">
            Without asking:
            {APPROVAL_SWITCHES.map(s => (
              <label key={s.key}>
                <input
                  type="checkbox"
                  data-key={s.key}
                  checked={approvals[s.key as ApprovalKey]}
                  onChange={e => {
                    const next = { ...approvals, [s.key]: e.target.checked };
                    setApprovals(next);
                    model.setApproval(s.key, e.target.checked);
                  }}
                />
                {s.label}
              </label>
            ))}
          </div>
        </div>
      )}
      <ContextChips chips={promptContext.chips} onRemove={promptContext.remove} />
      <textarea
        onFocus={promptContext.refresh}
        data-testid="hdsp-prompt"
        className="hdsp-prompt"
        rows={3}
        value={text}
        placeholder={open === null ? 'Ask hdsp to do something (Enter sends, Shift+Enter a new line)' : 'A message to this task (Enter sends)'}
        onChange={e => setText(e.target.value)}
        onKeyDown={e => {
          if (e.key === 'Enter' && !e.shiftKey) {
            e.preventDefault();
            send();
          }
        }}
      />
      {steerable && <DeliveryChoice steer={steer} onChange={setSteer} />}
      <button data-testid="hdsp-send" className="jp-Button jp-mod-accept hdsp-button" disabled={sending || !text.trim()} onClick={send}>
        {open === null ? 'Start task' : 'Send'}
      </button>
    </div>
  );
}

export function Panel(props: Props): JSX.Element {
  const state = useSyncExternalStore(props.model.subscribe, props.model.getState);
  const open = state.open;
  const row = open ? state.tasks.find(t => t.id === open.taskId) : undefined;
  const parent = row?.parentTaskId ? state.tasks.find(t => t.id === row.parentTaskId) : undefined;
  return (
    <Ctx.Provider value={props}>
      <div data-testid="hdsp-panel" className="hdsp-panel">
        <ConnectionBanner state={state} />
        <div className="hdsp-toolbar">
          <button data-testid="hdsp-new-task" className="jp-Button hdsp-button" onClick={() => void props.model.openTask(null)}>
            New task
          </button>
        </div>
        <TaskList state={state} />
        {state.error && (
          <div data-testid="hdsp-error" className="hdsp-error" role="alert">
            {state.error}
            <button className="hdsp-dismiss" title="Dismiss" onClick={() => props.model.dispatch({ type: 'error', message: null })}>
              ✕
            </button>
          </div>
        )}
        {open && <TaskHeader task={open} row={row} parent={parent} />}
        {open && <AgentTree state={state} task={open} />}
        {open && <TodoList mode={row?.mode} todos={row?.todos} onSave={markdown => props.model.updateTodoList(markdown)} />}
        {open && <Variables model={props.model} task={open} />}
        {open && <Checkpoints model={props.model} task={open} />}
        {open && <Conversation task={open} />}
        <Composer state={state} />
      </div>
    </Ctx.Provider>
  );
}
