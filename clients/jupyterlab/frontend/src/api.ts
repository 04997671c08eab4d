/**
 * The server extension's HTTP surface (CONTRACT.md): status, commands, blobs,
 * all under `{base_url}hdsp/` and behind Jupyter Server's own authentication
 * (ServerConnection sends the token and the XSRF header).
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import type { CommandResults, ErrorCode, StatusResult, TaskCommand } from './wire';

/** A protocol command, exactly as in TaskCommand.data. */
export type Command = TaskCommand['data'];
export type CommandName = Command['commandName'];

export interface StatusReply {
  daemon: 'running' | 'down';
  hint: string | null;
  status: StatusResult | null;
}

/** A command the daemon (or the server extension) refused, in plain words. */
export class CommandError extends Error {
  constructor(
    readonly code: ErrorCode | string,
    message: string,
    readonly status: number
  ) {
    super(message);
    this.name = 'CommandError';
  }
}

export class HdspApi {
  constructor(readonly settings: ServerConnection.ISettings = ServerConnection.makeSettings()) {}

  url(...parts: string[]): string {
    return URLExt.join(this.settings.baseUrl, 'hdsp', ...parts);
  }

  /** The URL of an image kept in the daemon's blob store. */
  blobUrl(sha256: string): string {
    return this.url('blob', sha256);
  }

  /** The WebSocket URL of the event stream, resuming after `since` when given. */
  eventsUrl(since: number | null): string {
    const base = URLExt.join(this.settings.wsUrl, 'hdsp', 'events');
    const query: Record<string, string> = {};
    if (since !== null && since > 0) {
      query.since = String(since);
    }
    if (this.settings.token && this.settings.appendToken) {
      query.token = this.settings.token;
    }
    return base + URLExt.objectToQueryString(query);
  }

  async status(): Promise<StatusReply> {
    const response = await this.fetch(this.url('status'), { method: 'GET' });
    const body = await readJson(response);
    if (!response.ok) {
      throw errorOf(response, body);
    }
    return body as StatusReply;
  }

  /** Sends one command; resolves to its result, or throws a CommandError. */
  async command<N extends CommandName>(
    command: Extract<Command, { commandName: N }>,
    extra: { notebookKernelId?: string } = {}
  ): Promise<N extends keyof CommandResults ? Required<CommandResults>[N] : unknown> {
    const response = await this.fetch(this.url('command'), {
      method: 'POST',
      body: JSON.stringify({ command, ...extra })
    });
    const body = await readJson(response);
    if (!response.ok) {
      throw errorOf(response, body);
    }
    return (body as { result: never }).result;
  }

  private async fetch(url: string, init: RequestInit): Promise<Response> {
    try {
      return await ServerConnection.makeRequest(url, init, this.settings);
    } catch (error) {
      throw new CommandError(
        'network',
        'The Jupyter server did not answer; check that it is still running.',
        0
      );
    }
  }
}

async function readJson(response: Response): Promise<unknown> {
  const text = await response.text();
  if (!text) {
    return null;
  }
  try {
    return JSON.parse(text);
  } catch {
    return { error: { code: 'invalid_reply', message: text.slice(0, 500) } };
  }
}

function errorOf(response: Response, body: unknown): CommandError {
  const error = (body as { error?: { code?: string; message?: string } } | null)?.error;
  if (error && typeof error.message === 'string') {
    return new CommandError(error.code ?? 'error', error.message, response.status);
  }
  if (response.status === 403) {
    return new CommandError('forbidden', 'The Jupyter server refused the request (403): reload the page to log in again.', 403);
  }
  if (response.status === 404) {
    return new CommandError(
      'not_found',
      "The hdsp server extension is not enabled in this Jupyter server (404): run `jupyter server extension enable hdsp.client.jupyterlab`.",
      404
    );
  }
  return new CommandError('http', `The Jupyter server answered ${response.status} ${response.statusText}.`, response.status);
}
