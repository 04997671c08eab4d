/* eslint-disable */
/**
 * The hdsp wire protocol's types, generated from protocol/schema.json by
 * scripts/generate-wire-types.mjs (npm run generate:types). Do not edit by hand:
 * change the Python types, run `make schema`, then `make wire-types`.
 */

/**
 * A frame a client sends on `control`, told apart by `type`.
 */
export type ClientMessage = Connect | TaskCommand | Disconnect;
/**
 * Jupyter's execution states plus what the daemon knows about the process.
 */
export type KernelState = 'busy' | 'dead' | 'idle' | 'restarting' | 'starting';
/**
 * Where a task is; Roo's classification plus hdsp's terminal states.
 */
export type TaskState = 'aborted' | 'completed' | 'idle' | 'interactive' | 'paused' | 'resumable' | 'running';
export type StorageState = 'failing' | 'ok' | 'readOnly';
export type ErrorCode =
  | 'already_answered'
  | 'blob_not_found'
  | 'cursor_expired'
  | 'internal'
  | 'invalid_request'
  | 'invalid_state'
  | 'kernel_not_found'
  | 'not_connected'
  | 'overloaded'
  | 'shutting_down'
  | 'storage_unavailable'
  | 'task_busy'
  | 'task_not_found'
  | 'too_large'
  | 'unavailable'
  | 'unknown_client'
  | 'unknown_command'
  | 'unsupported_version';
/**
 * What went wrong, for programs.
 */
export type ErrorCode1 =
  | 'already_answered'
  | 'blob_not_found'
  | 'cursor_expired'
  | 'internal'
  | 'invalid_request'
  | 'invalid_state'
  | 'kernel_not_found'
  | 'not_connected'
  | 'overloaded'
  | 'shutting_down'
  | 'storage_unavailable'
  | 'task_busy'
  | 'task_not_found'
  | 'too_large'
  | 'unavailable'
  | 'unknown_client'
  | 'unknown_command'
  | 'unsupported_version';
/**
 * Any frame on the wire; `$defs` names each type (protocol/README.md).
 */
export type HdspFrame = ClientMessage | ServerMessage;
/**
 * A frame the daemon sends: Ack and Reply on `control`, TaskEvent on `events` (the second frame, after the topic); told apart by `type`.
 */
export type ServerMessage = Ack | Reply | TaskEvent;
export type StorageState1 = 'failing' | 'ok' | 'readOnly';

/**
 * Every type of the wire by its name in schema.json (an index, not a message).
 */
export interface HdspWire {
  Ack: Ack;
  AckData: AckData;
  ActiveCell: ActiveCell;
  AgentInfo: AgentInfo;
  AgentList: AgentList;
  AnswerDocumentEdit: AnswerDocumentEdit;
  AttachKernel: AttachKernel;
  BlobData: BlobData;
  CallTool: CallTool;
  CallToolData: CallToolData;
  CancelTask: CancelTask;
  CheckpointDiff: CheckpointDiff;
  CheckpointInfo: CheckpointInfo;
  CheckpointList: CheckpointList;
  CheckpointRestoreResult: CheckpointRestoreResult;
  CheckpointRestored: CheckpointRestored;
  CheckpointSaved: CheckpointSaved;
  ClientInfo: ClientInfo;
  ClientMessage: ClientMessage;
  ClineMessage: ClineMessage;
  CloseTask: CloseTask;
  CommandInfo: CommandInfo;
  CommandList: CommandList;
  CommandResults: CommandResults;
  CommandsResponse: CommandsResponse;
  CompletedInfo: CompletedInfo;
  CondenseTask: CondenseTask;
  Connect: Connect;
  CreateTask: CreateTask;
  CreateTaskData: CreateTaskData;
  DaemonShuttingDown: DaemonShuttingDown;
  DeleteMessage: DeleteMessage;
  DeleteMessageData: DeleteMessageData;
  DeleteProfile: DeleteProfile;
  DeleteQueuedMessage: DeleteQueuedMessage;
  DeleteSecret: DeleteSecret;
  DiffCheckpoints: DiffCheckpoints;
  DiffCheckpointsData: DiffCheckpointsData;
  Disconnect: Disconnect;
  Discovery: Discovery;
  DocumentCell: DocumentCell;
  DocumentEdit: DocumentEdit;
  DocumentEditAnswer: DocumentEditAnswer;
  DocumentEditRequest: DocumentEditRequest;
  DocumentEditRequested: DocumentEditRequested;
  DocumentEditTaken: DocumentEditTaken;
  DocumentsHosted: DocumentsHosted;
  EditMessage: EditMessage;
  EditMessageData: EditMessageData;
  ErrorCode: ErrorCode;
  ErrorInfo: ErrorInfo;
  EventsSynced: EventsSynced;
  ExecuteCode: ExecuteCode;
  ExecutionOutput: ExecutionOutput;
  ExecutionOutputData: ExecutionOutputData;
  ExecutionResult: ExecutionResult;
  ExportSettings: ExportSettings;
  FileChange: FileChange;
  ForkTask: ForkTask;
  ForkTaskData: ForkTaskData;
  GetBlob: GetBlob;
  GetBlobData: GetBlobData;
  GetCommands: GetCommands;
  GetCommandsData: GetCommandsData1;
  GetModels: GetModels;
  GetModelsData: GetModelsData1;
  GetModes: GetModes;
  GetModesData: GetModesData1;
  GetSettings: GetSettings;
  GetStatus: GetStatus;
  GetSystemPrompt: GetSystemPrompt;
  GetSystemPromptData: GetSystemPromptData1;
  GetTask: GetTask;
  GetTaskData: GetTaskData;
  GetTaskPage: GetTaskPage;
  GetTaskPageData: GetTaskPageData;
  HdspFrame: HdspFrame;
  HistoryItem: HistoryItem;
  HostDocuments: HostDocuments;
  ImportResult: ImportResult;
  ImportSettings: ImportSettings;
  ImportSettingsData: ImportSettingsData;
  InterruptKernel: InterruptKernel;
  KernelInfo: KernelInfo;
  KernelList: KernelList;
  KernelOutput: KernelOutput;
  KernelRef: KernelRef;
  KernelReplay: KernelReplay;
  KernelShutdown: KernelShutdown;
  KernelStarted: KernelStarted;
  KernelState: KernelState;
  KernelStatus: KernelStatus;
  KernelVariable: KernelVariable;
  ListAgents: ListAgents;
  ListCheckpoints: ListCheckpoints;
  ListCheckpointsData: ListCheckpointsData;
  ListKernels: ListKernels;
  ListMcpServers: ListMcpServers;
  ListProfiles: ListProfiles;
  ListRemoteKernels: ListRemoteKernels;
  ListTasks: ListTasks;
  ListTasksData: ListTasksData1;
  ListVariables: ListVariables;
  McpServerChanged: McpServerChanged;
  McpServerList: McpServerList;
  McpServerStatus: McpServerStatus;
  McpToolInfo: McpToolInfo;
  MessageEvent: MessageEvent;
  MessagePayload: MessagePayload;
  ModeInfo: ModeInfo;
  ModeList: ModeList;
  ModelEntry: ModelEntry;
  ModelList: ModelList;
  ModelsResponse: ModelsResponse;
  ModesResponse: ModesResponse;
  OfferedMcpServer: OfferedMcpServer;
  OutlineCell: OutlineCell;
  Ping: Ping;
  Pong: Pong;
  ProfileData: ProfileData1;
  ProfileInfo: ProfileInfo;
  ProfileList: ProfileList;
  ProfileNameData: ProfileNameData;
  ProgressStatus: ProgressStatus;
  PromptContext: PromptContext;
  QueuedMessage: QueuedMessage;
  QueuedMessagesUpdated: QueuedMessagesUpdated;
  Rejection: Rejection;
  RelayedImage: RelayedImage;
  RemoteKernel: RemoteKernel;
  RemoteKernelList: RemoteKernelList;
  RemoteSession: RemoteSession;
  Replay: Replay;
  ReplayData: ReplayData;
  ReplayPage: ReplayPage;
  ReplayedExecution: ReplayedExecution;
  Reply: Reply;
  RespondToAsk: RespondToAsk;
  RespondToAskData: RespondToAskData;
  RestartKernel: RestartKernel;
  RestartMcpServer: RestartMcpServer;
  RestoreCheckpoint: RestoreCheckpoint;
  RestoreCheckpointData: RestoreCheckpointData;
  ResumeTask: ResumeTask;
  RewindTask: RewindTask;
  RewindTaskData: RewindTaskData;
  SandboxStatus: SandboxStatus;
  SaveProfile: SaveProfile;
  SaveProfileData: SaveProfileData;
  SecretInfo: SecretInfo;
  SecretNameData: SecretNameData;
  SelectProfile: SelectProfile;
  SendMessage: SendMessage;
  SendMessageData: SendMessageData1;
  ServerMessage: ServerMessage;
  SetSecret: SetSecret;
  SetSecretData: SetSecretData;
  SettingsChange: SettingsChange;
  SettingsChanged: SettingsChanged;
  SettingsExport: SettingsExport;
  SettingsView: SettingsView;
  Shutdown: Shutdown;
  ShutdownKernel: ShutdownKernel;
  StartKernel: StartKernel;
  StartNewTask: StartNewTask;
  StartNewTaskData: StartNewTaskData;
  StatusResult: StatusResult;
  StorageChanged: StorageChanged;
  StorageHealth: StorageHealth;
  StorageState: StorageState1;
  SwitchMode: SwitchMode;
  SwitchModeData: SwitchModeData;
  SystemPromptText: SystemPromptText;
  TaskAborted: TaskAborted;
  TaskActive: TaskActive;
  TaskAskResponded: TaskAskResponded;
  TaskClosed: TaskClosed;
  TaskCommand: TaskCommand;
  TaskCompleted: TaskCompleted;
  TaskConfiguration: TaskConfiguration1;
  TaskCreated: TaskCreated;
  TaskDelegated: TaskDelegated;
  TaskDelegationCompleted: TaskDelegationCompleted;
  TaskDelegationResumed: TaskDelegationResumed;
  TaskEvent: TaskEvent;
  TaskFocused: TaskFocused;
  TaskIdle: TaskIdle;
  TaskInteractive: TaskInteractive;
  TaskList: TaskList;
  TaskMessagesDeleted: TaskMessagesDeleted;
  TaskModeSwitched: TaskModeSwitched;
  TaskPage: TaskPage;
  TaskPaused: TaskPaused;
  TaskRef: TaskRef;
  TaskResumable: TaskResumable;
  TaskRewound: TaskRewound;
  TaskSnapshot: TaskSnapshot;
  TaskSpawned: TaskSpawned;
  TaskStarted: TaskStarted;
  TaskState: TaskState;
  TaskTodoListUpdated: TaskTodoListUpdated;
  TaskTokenUsageUpdated: TaskTokenUsageUpdated;
  TaskToolFailed: TaskToolFailed;
  TaskUnfocused: TaskUnfocused;
  TaskUnpaused: TaskUnpaused;
  TcpStatus: TcpStatus;
  TodoItem: TodoItem;
  TokenUsage: TokenUsage;
  ToolCallResult: ToolCallResult;
  ToolUsageEntry: ToolUsageEntry | undefined;
  TrustMcpServer: TrustMcpServer;
  UpdateSettings: UpdateSettings;
  UpdateSettingsData: UpdateSettingsData;
  UpdateTodoList: UpdateTodoList;
  UpdateTodoListData: UpdateTodoListData;
  VariableColumn: VariableColumn;
  VariableList: VariableList;
  VariableSummary: VariableSummary;
}
export interface Ack {
  data: AckData;
  origin?: 'server';
  type: 'Ack';
}
export interface AckData {
  /**
   * Optional features: "replay" (the Replay command), "events.prevSeq" (durable events carry prevSeq), "events.sync" (sync probes on the events socket are answered with eventsSynced).
   */
  capabilities?: string[];
  /**
   * This session's id: put it in every TaskCommand sent on this connection. A new Connect (after the daemon restarted, say) gives a new one.
   */
  clientId: string;
  /**
   * The newest `seq` in the event log when the client connected: Replay from here to get every durable event after the handshake.
   */
  headSeq: number;
  /**
   * The largest frame, in bytes, the daemon reads on control; a larger one gets too_large. 0: not stated (a daemon older than the limit).
   */
  maxMessageSize?: number;
  /**
   * The daemon's process id.
   */
  pid: number;
  /**
   * The daemon's parent's process id.
   */
  ppid: number;
  /**
   * The protocol version the daemon speaks.
   */
  protocolVersion: number;
  /**
   * The daemon's package version.
   */
  serverVersion: string;
  /**
   * Over TCP: the name under which the daemon authorised this connection's CURVE key. The daemon records it as who did what (an answered ask's answeredBy), whatever `client.name` says. Absent on the local ipc:// socket.
   */
  user?: string | null;
}
/**
 * The cell the user has active (JupyterLab's active cell).
 */
export interface ActiveCell {
  /**
   * Its nbformat cell id, when known.
   */
  id?: string | null;
  /**
   * Its index, from 0.
   */
  index: number;
}
export interface AgentInfo {
  /**
   * The tool groups it may use.
   */
  groups?: string[];
  instructions: string;
  /**
   * A mode whose tools it takes instead of `groups`.
   */
  mode?: string | null;
  name: string;
  /**
   * The provider profile it uses; None: its caller's.
   */
  profile?: string | null;
  source?: 'built-in' | 'settings';
}
export interface AgentList {
  agents: AgentInfo[];
  /**
   * How deep a tree of agents may grow (agent_limits).
   */
  maxDepth?: number;
  /**
   * How many agent calls of one task may run at once.
   */
  maxFanOut?: number;
}
/**
 * A document host's answer to a `documentEditRequested`.
 */
export interface AnswerDocumentEdit {
  commandName: 'AnswerDocumentEdit';
  data: DocumentEditAnswer;
}
/**
 * The host's answer. `cells`: the document's cells after the edit (outputs
 * only for a read); for a conflict, the cell in conflict with its live source.
 * `notebook`: the whole notebook, in the answer to a `snapshot`.
 */
export interface DocumentEditAnswer {
  cells?: DocumentCell[] | null;
  hostId: string;
  message?: string | null;
  /**
   * The whole notebook (nbformat 4 JSON); only for a `snapshot`.
   */
  notebook?: {} | null;
  requestId: string;
  status: 'conflict' | 'expired' | 'invalid' | 'not_open' | 'ok';
}
/**
 * A cell as the open document has it (nbformat 4.5 names).
 */
export interface DocumentCell {
  cellType: string;
  executionCount?: number | null;
  id: string;
  metadata?: {} | null;
  /**
   * nbformat outputs; only in the answer to a `read`.
   */
  outputs?: {}[] | null;
  source: string;
}
/**
 * Use a kernel that runs already: a notebook's on this machine, by its
 * connection file (from Jupyter's runtime dir), or one a Jupyter server runs,
 * by its id there (ListRemoteKernels). Exactly one of the two.
 */
export interface AttachKernel {
  commandName: 'AttachKernel';
  connectionFile?: string | null;
  /**
   * The profile whose kernels settings (provider, gateway) apply; the current one by default.
   */
  profile?: string | null;
  /**
   * The kernel's id on the Jupyter server (ListRemoteKernels).
   */
  remoteKernelId?: string | null;
}
export interface BlobData {
  /**
   * base64 of the bytes from `offset` on (all of the rest when it fits).
   */
  data?: string;
  /**
   * E.g. "image/png"; "" when the writer did not say (bare base64 from a client).
   */
  mediaType: string;
  /**
   * Where `data` begins in the blob.
   */
  offset?: number;
  /**
   * The blob's sha256.
   */
  sha256: string;
  /**
   * Bytes of the whole blob.
   */
  size: number;
}
/**
 * Run one tool in a task that is not working, as if its model had called it,
 * and answer with the result once the call is done: after an approval ask was
 * answered (by any client) if the policy asks. `CancelTask` stops it (a running
 * kernel is interrupted). Runs concurrently with other commands (an answer to its
 * ask comes as a RespondToAsk ordered by the same task).
 */
export interface CallTool {
  commandName: 'CallTool';
  data: CallToolData;
  taskId: string;
}
export interface CallToolData {
  /**
   * The tool's arguments, checked against its JSON Schema.
   */
  arguments?: {};
  /**
   * Run the task's code in this kernel (ListKernels) from now on, as a message's context can; by default the task starts its own kernel on first use.
   */
  kernelId?: string | null;
  /**
   * One of hdsp's own tools that reads, writes or runs code or commands (read_notebook, edit_cell, execute_code, list_variables, ...); the tools that steer a task (attempt_completion, ask_followup_question, switch_mode, update_todo_list) are refused.
   */
  tool: string;
}
export interface CancelTask {
  commandName: 'CancelTask';
  taskId: string;
}
export interface CheckpointDiff {
  checkpoint: number;
  files?: FileChange[];
  /**
   * Git repositories nested in the workspace (folders with a .git of their own, relative, ending in /): checkpoints leave them out, and a restore never touches their files; their own git keeps them.
   */
  nested?: string[];
  taskId: string;
  /**
   * The other checkpoint; absent: the workspace as it is now.
   */
  to?: number | null;
}
export interface FileChange {
  binary?: boolean;
  /**
   * A unified diff of a text file; for a notebook, its changes cell by cell (sources and outputs); empty for a binary file. Untrusted text.
   */
  diff?: string;
  notebook?: boolean;
  path: string;
  status: 'added' | 'deleted' | 'modified';
}
export interface CheckpointInfo {
  /**
   * Files that changed since the task's previous checkpoint.
   */
  changed?: string[];
  /**
   * The shadow repository's commit (hex).
   */
  commit: string;
  /**
   * Kernel executions the task had recorded when it was taken.
   */
  executions?: number;
  /**
   * The task's `checkpoint_saved` message that shows it.
   */
  messageTs?: number | null;
  /**
   * What was left out (files over the size limit, nested repositories).
   */
  notes?: string[];
  /**
   * The checkpoint's number within its task, from 1.
   */
  number: number;
  /**
   * Why it was taken ("before write_to_file", "before restore").
   */
  reason: string;
  taskId: string;
  /**
   * When it was taken (milliseconds since the epoch).
   */
  ts: number;
}
export interface CheckpointList {
  checkpoints?: CheckpointInfo[];
  /**
   * Whether checkpoints are taken for this task's workspace.
   */
  enabled?: boolean;
  /**
   * Git repositories nested in the workspace (folders with a .git of their own, relative, ending in /): checkpoints leave them out, and a restore never touches their files; their own git keeps them.
   */
  nested?: string[];
  /**
   * Why checkpoints are off, when they are.
   */
  note?: string | null;
  taskId: string;
}
export interface CheckpointRestoreResult {
  checkpoint: number;
  /**
   * Files the restore changed.
   */
  files?: string[];
  kernel?: KernelReplay | null;
  /**
   * Git repositories nested in the workspace (folders with a .git of their own, relative, ending in /): checkpoints leave them out, and a restore never touches their files; their own git keeps them.
   */
  nested?: string[];
  /**
   * What did not go as usual (a notebook open in JupyterLab that did not answer, so its file was written instead).
   */
  notes?: string[];
  /**
   * Of `files`, the notebooks open in JupyterLab: restored in the open document (every view shows it at once) and saved there, so the file matches what JupyterLab shows.
   */
  openNotebooks?: string[];
  /**
   * The kernel's replay waits for the user's approval (an ask of the task): its outcome comes as the task's `checkpoint_restored` message and a `checkpointRestored` event (the request set `waitForReplay` false).
   */
  replayPending?: boolean;
  restore: 'both' | 'files' | 'history';
  rewound?: boolean;
  taskId: string;
  /**
   * The checkpoint of the state before the restore: restore it to undo.
   */
  undoCheckpoint?: number | null;
}
export interface KernelReplay {
  approved: boolean;
  error?: string | null;
  executions?: ReplayedExecution[];
  /**
   * The seq of the execution that failed, if one did.
   */
  failedAt?: number | null;
  variables?: KernelVariable[];
}
export interface ReplayedExecution {
  code: string;
  note?: string | null;
  /**
   * Its place in the task's execution log.
   */
  seq: number;
  status: 'error' | 'not_run' | 'ok' | 'skipped';
}
export interface KernelVariable {
  name: string;
  /**
   * A short repr (untrusted text).
   */
  summary?: string;
  type: string;
}
/**
 * [taskId, checkpoint, mode]: the task's files ("files"), history ("history")
 * or both ("both") were restored to the checkpoint.
 */
export interface CheckpointRestored {
  eventName: 'checkpointRestored';
  /**
   * @minItems 3
   * @maxItems 3
   */
  payload: [string, CheckpointInfo, string];
}
/**
 * [taskId, checkpoint]: a checkpoint of the task's workspace was taken.
 */
export interface CheckpointSaved {
  eventName: 'checkpointSaved';
  /**
   * @minItems 2
   * @maxItems 2
   */
  payload: [string, CheckpointInfo];
}
export interface ClientInfo {
  /**
   * What sort of frontend: "cli", "library", "jupyterlab", "script", ...
   */
  kind?: string;
  name: string;
  /**
   * The client's process id (the daemon is on the same machine): a session whose process has ended is forgotten, even without a Disconnect.
   */
  pid?: number | null;
  version: string;
}
/**
 * The handshake: the first frame a client sends on `control`.
 */
export interface Connect {
  client: ClientInfo;
  origin?: 'client';
  /**
   * The protocol version the client speaks (1); another gets unsupported_version.
   */
  protocolVersion: number;
  type: 'Connect';
}
/**
 * A command; the daemon answers it with a `Reply` carrying the same requestId.
 */
export interface TaskCommand {
  /**
   * The `clientId` of the Ack this connection received; another value, or none yet, gets not_connected.
   */
  clientId: string;
  /**
   * One of these, told apart by the value of `commandName`.
   */
  data:
    | StartNewTask
    | CancelTask
    | CloseTask
    | CondenseTask
    | RewindTask
    | EditMessage
    | DeleteMessage
    | ForkTask
    | ResumeTask
    | SendMessage
    | RespondToAsk
    | DeleteQueuedMessage
    | ListTasks
    | GetTask
    | GetTaskPage
    | Replay
    | Ping
    | GetStatus
    | Shutdown
    | ListKernels
    | ListRemoteKernels
    | StartKernel
    | AttachKernel
    | InterruptKernel
    | RestartKernel
    | ShutdownKernel
    | ExecuteCode
    | ListVariables
    | ListMcpServers
    | RestartMcpServer
    | TrustMcpServer
    | GetSettings
    | UpdateSettings
    | ListProfiles
    | SaveProfile
    | DeleteProfile
    | SelectProfile
    | SetSecret
    | DeleteSecret
    | ExportSettings
    | ImportSettings
    | GetModels
    | GetBlob
    | ListCheckpoints
    | DiffCheckpoints
    | RestoreCheckpoint
    | HostDocuments
    | AnswerDocumentEdit
    | GetModes
    | GetCommands
    | GetSystemPrompt
    | SwitchMode
    | UpdateTodoList
    | ListAgents
    | CreateTask
    | CallTool;
  origin?: 'client';
  /**
   * Chosen by the client, unique among its commands in flight; the `Reply` carries it back.
   */
  requestId: string;
  type: 'TaskCommand';
}
export interface StartNewTask {
  commandName: 'StartNewTask';
  data: StartNewTaskData;
}
export interface StartNewTaskData {
  configuration?: TaskConfiguration;
  /**
   * hdsp: what the message is about (the active notebook, cell, selection, an outline), shown to the model as untrusted data and kept on the message.
   */
  context?: PromptContext | null;
  images?: string[] | null;
  /**
   * hdsp: MCP servers this client offers the task (an ACP host's; at most 16), beside the configured ones; they replace the ones offered before. Absent: none.
   */
  mcpServers?: OfferedMcpServer[] | null;
  newTab?: boolean | null;
  text: string;
}
/**
 * The part of Roo's settings object that a new task reads. Other keys are
 * accepted and ignored.
 */
export interface TaskConfiguration {
  /**
   * hdsp: the agent the task runs (ListAgents; seed 002): its instructions and tools, and it may call other agents. None: a task of its mode, as before.
   */
  agent?: string | null;
  /**
   * hdsp: the daemon refuses `/`, its user's home directory itself and its own data and runtime dirs as a workspace (the agent reads a workspace freely) unless this is set, by a person who named one of them on purpose.
   */
  allowBroadWorkspace?: boolean;
  /**
   * Name of the provider profile to use (Roo's apiConfigName).
   */
  apiConfigName?: string | null;
  /**
   * Auto-approval settings for this task only (hdsp's ApprovalSettings fields, or Roo's names such as alwaysAllowWrite), over the daemon's settings.
   */
  approvals?: {} | null;
  /**
   * Roo's customInstructions: instructions for this task, in its system prompt after the global ones (GetSystemPrompt shows where).
   */
  customInstructions?: string | null;
  /**
   * A kernel (ListKernels) the task's code runs in; by default the task starts its own on first use, in its workspace.
   */
  kernelId?: string | null;
  /**
   * hdsp: where the task's kernels run: local (this machine, in hdspd's sandbox) or gateway (the Jupyter server of the profile's or the settings' kernels.gateway). None: as the profile's or the settings' kernels.provider says.
   */
  kernelProvider?: ('gateway' | 'local') | null;
  /**
   * The task's mode (GetModes lists them); `code` when absent.
   */
  mode?: string | null;
  /**
   * Directory the agent works in (absolute). Clients send their own working directory when the user names none; without one the daemon uses its own working directory, unless that is a directory it refuses (see below).
   */
  workspace?: string | null;
}
/**
 * What the user's message is about, as the frontend saw it when it was sent.
 * Every field is optional; a client sends what the user kept (the panel's
 * context chips).
 */
export interface PromptContext {
  /**
   * The active cell.
   */
  cell?: ActiveCell | null;
  /**
   * The daemon's id (ListKernels) of the kernel the notebook uses: the task's code runs in it from this message on. Set by JupyterLab's server extension, which attaches the notebook's kernel itself; a value the browser sends is dropped.
   */
  kernelId?: string | null;
  /**
   * The active notebook's path, relative to the task's workspace or absolute inside it (the daemon keeps it relative, and refuses a path out of it).
   */
  notebook?: string | null;
  /**
   * A compact outline of the notebook, cell by cell (the frontend's, of the notebook as it shows it; see `outlineFromFile`).
   */
  outline?: OutlineCell[] | null;
  /**
   * Have the daemon read the outline (and the active cell's id) from the notebook's file, inside the task's workspace: for a client that has only the path (the command line's --notebook). A cell index past the file's cells is then refused.
   */
  outlineFromFile?: boolean;
  /**
   * The text the user had selected in the active cell.
   */
  selection?: string | null;
  /**
   * The notebook has more cells than the outline's 200.
   */
  truncated?: boolean;
}
/**
 * One cell of a notebook's outline.
 */
export interface OutlineCell {
  cellType: 'code' | 'markdown' | 'raw';
  executionCount?: number | null;
  /**
   * The cell's first lines (at most 3, 240 characters).
   */
  head?: string;
  id?: string | null;
  /**
   * How many lines the cell's source has in all.
   */
  lines?: number;
  /**
   * Its outputs, by kind: "stream", "error", or the main mime type of a display ("image/png", "text/html", ...), in order, repeats merged.
   *
   * @maxItems 16
   */
  outputKinds?:
    | []
    | [string]
    | [string, string]
    | [string, string, string]
    | [string, string, string, string]
    | [string, string, string, string, string]
    | [string, string, string, string, string, string]
    | [string, string, string, string, string, string, string]
    | [string, string, string, string, string, string, string, string]
    | [string, string, string, string, string, string, string, string, string]
    | [string, string, string, string, string, string, string, string, string, string]
    | [string, string, string, string, string, string, string, string, string, string, string]
    | [string, string, string, string, string, string, string, string, string, string, string, string]
    | [string, string, string, string, string, string, string, string, string, string, string, string, string]
    | [string, string, string, string, string, string, string, string, string, string, string, string, string, string]
    | [
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string
      ]
    | [
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string
      ];
}
/**
 * An MCP server a client offers one task, beside the configured ones: a
 * program spoken to over stdio (`command`, `args`, `env`; it runs in the task's
 * workspace) or a Streamable HTTP endpoint (`url`, `headers`). hdspd keeps it in
 * memory only, never on disk nor in its log (its `env` and `headers` may hold
 * the client's credentials, taken as they are: `${secret:NAME}` is not filled
 * in), until the task closes, the daemon stops or the client offers others.
 * A configured server of the same name wins; a tool of an offered server runs
 * as any MCP tool does: after an approval, unless `alwaysAllowMcp` is on.
 */
export interface OfferedMcpServer {
  args?: string[];
  command?: string | null;
  env?: {
    [k: string]: string | undefined;
  };
  headers?: {
    [k: string]: string | undefined;
  };
  name: string;
  url?: string | null;
}
export interface CloseTask {
  commandName: 'CloseTask';
  taskId: string;
}
/**
 * Condense a task's conversation now: the model summarises its older part,
 * which the summary replaces in later requests (kept in the history). The task
 * must not be working; a `condense_context` message (or
 * `condense_context_error`) says how it went.
 */
export interface CondenseTask {
  commandName: 'CondenseTask';
  taskId: string;
}
/**
 * Take a task's history back to one of its messages: the UI and API messages
 * after it are removed (a running turn is cancelled first; kernel state is not
 * rolled back), and what a removed summary or truncation hid comes back. A
 * `taskRewound` event tells every client.
 */
export interface RewindTask {
  commandName: 'RewindTask';
  data: RewindTaskData;
}
export interface RewindTaskData {
  /**
   * Remove that message too (true), or keep it and remove what came after. The task's first message always stays.
   */
  include?: boolean;
  taskId: string;
  /**
   * The UI message to rewind to.
   */
  ts: number;
}
/**
 * Replace one of the user's messages and go on from there: rewind to it
 * (removing it) and send `text` as the next message.
 */
export interface EditMessage {
  commandName: 'EditMessage';
  data: EditMessageData;
}
export interface EditMessageData {
  /**
   * hdsp: what the new message is about (as SendMessage's `context`); the edited message's own context is not carried over.
   */
  context?: PromptContext | null;
  images?: string[] | null;
  taskId: string;
  text: string;
  /**
   * A user_feedback message of the task.
   */
  ts: number;
}
/**
 * Delete one message (not the task's first): it goes from the history and from
 * what later requests send. One of the user's messages goes alone (the model's
 * answers stay, and so do tool results sent with it); the text of one of the
 * model's replies goes alone (the reply's tool calls stay); a tool call goes with
 * its result and every message of it. A summary that condensed it goes too, and
 * what the summary hid comes back. A running turn is cancelled first. A
 * `taskMessagesDeleted` event (with every ts that went) tells every client.
 */
export interface DeleteMessage {
  commandName: 'DeleteMessage';
  data: DeleteMessageData;
}
export interface DeleteMessageData {
  taskId: string;
  /**
   * A message of the task: a user_feedback message, the model's text, or any message of a tool call (one with a toolUseId).
   */
  ts: number;
}
/**
 * A new task with the history of this one up to a message (inclusive); the
 * original is not changed. The reply names the new task, which waits for a message.
 */
export interface ForkTask {
  commandName: 'ForkTask';
  data: ForkTaskData;
}
export interface ForkTaskData {
  taskId: string;
  /**
   * The last UI message the new task keeps.
   */
  ts: number;
}
export interface ResumeTask {
  commandName: 'ResumeTask';
  /**
   * The task id, as in Roo.
   */
  data: string;
}
export interface SendMessage {
  commandName: 'SendMessage';
  data?: SendMessageData;
  taskId: string;
}
export interface SendMessageData {
  /**
   * hdsp: what the message is about (the active notebook, cell, selection, an outline), shown to the model as untrusted data and kept on the message.
   */
  context?: PromptContext | null;
  /**
   * To a task that is working: `queue` waits until its turn ends (then starts the next turn); `steer` joins the running turn, added to the conversation before its next model request (a `user_feedback` message shows where). A steered message the turn ends without is delivered as a queued one.
   */
  delivery?: 'queue' | 'steer';
  images?: string[] | null;
  /**
   * hdsp: MCP servers this client offers the task (an ACP host's; at most 16), beside the configured ones; they replace the ones offered before. Absent: the task keeps those it has.
   */
  mcpServers?: OfferedMcpServer[] | null;
  text?: string | null;
}
/**
 * Answer a waiting ask. The first valid answer wins; later ones are refused
 * with `already_answered`, and `taskAskResponded` tells every client.
 */
export interface RespondToAsk {
  commandName: 'RespondToAsk';
  data: RespondToAskData;
  taskId: string;
}
export interface RespondToAskData {
  /**
   * `ts` of the ask being answered: the ClineMessage with type "ask" that is the snapshot's `pendingAsk`, or the newest ask of the task's message events.
   */
  askTs: number;
  /**
   * hdsp: what an answer with text is about (as SendMessage's `context`), shown to the model as untrusted data and kept on the user's message.
   */
  context?: PromptContext | null;
  images?: string[] | null;
  /**
   * Roo's ClineAskResponse: "yesButtonClicked", "noButtonClicked", "messageResponse" or "objectResponse".
   */
  response: 'messageResponse' | 'noButtonClicked' | 'objectResponse' | 'yesButtonClicked';
  text?: string | null;
}
/**
 * Remove a message that waits in a task's queue (Roo: data is its id).
 */
export interface DeleteQueuedMessage {
  commandName: 'DeleteQueuedMessage';
  data: string;
  taskId: string;
}
export interface ListTasks {
  commandName: 'ListTasks';
  data?: ListTasksData;
}
export interface ListTasksData {
  /**
   * `nextCursor` of the previous page; absent for the newest tasks.
   */
  cursor?: string | null;
  /**
   * Only the tasks whose id starts with this (how a person's short id is resolved), newest first; one page, without `cursor`.
   */
  idPrefix?: string | null;
  /**
   * Most tasks in one page, 1 to 1000 (else invalid_request).
   */
  limit?: number;
}
export interface GetTask {
  commandName: 'GetTask';
  data: GetTaskData;
}
export interface GetTaskData {
  /**
   * The task's id (`HistoryItem.id`).
   */
  taskId: string;
}
/**
 * A page of a task's UI messages, oldest first: from `start` (or from after
 * `cursor`) up to `limit` of them. Paging from start 0 until `nextCursor` is
 * absent yields the messages `GetTask` returns, in the same order.
 */
export interface GetTaskPage {
  commandName: 'GetTaskPage';
  data: GetTaskPageData;
}
export interface GetTaskPageData {
  /**
   * `nextCursor` of the previous page: this page starts after that page's last message. Not together with `start`.
   */
  cursor?: string | null;
  /**
   * Most messages in the page.
   */
  limit?: number;
  start?: number | null;
  /**
   * The task's id.
   */
  taskId: string;
}
export interface Replay {
  commandName: 'Replay';
  data: ReplayData;
}
export interface ReplayData {
  /**
   * Most events in one page; the daemon keeps it within 1..1000.
   */
  limit?: number;
  /**
   * Exclusive cursor: the page holds events with `seq` greater than this. 0 for the first event; the `seq` of the last event seen, or the `headSeq` of an Ack or a snapshot, to continue from there. A cursor before the oldest kept (0 too, once the log was pruned: at each start of hdspd and every 10 min, to its retention) gets cursor_expired, whose message says what was kept.
   */
  sinceSeq: number;
  /**
   * Only the events of this topic: a task id, or the empty string for the daemon-wide events; absent for all.
   */
  taskId?: string | null;
}
export interface Ping {
  commandName: 'Ping';
}
export interface GetStatus {
  commandName: 'GetStatus';
}
export interface Shutdown {
  commandName: 'Shutdown';
}
export interface ListKernels {
  commandName: 'ListKernels';
}
/**
 * The kernels and sessions of the Jupyter server of the kernels.gateway
 * setting (or of the profile's).
 */
export interface ListRemoteKernels {
  commandName: 'ListRemoteKernels';
  /**
   * The profile whose kernels settings (provider, gateway) apply; the current one by default.
   */
  profile?: string | null;
}
export interface StartKernel {
  commandName: 'StartKernel';
  /**
   * Working directory of a local kernel, an absolute path (the client's directory; clients send their own by default). The daemon refuses none, a relative one, `/`, its user's home itself and its own directories, as for a workspace. Not used by a kernel on a Jupyter server.
   */
  cwd?: string | null;
  /**
   * Kernelspec name; "python3" by default (on a Jupyter server: its kernels.gateway.kernelName, else the server's default).
   */
  kernelName?: string | null;
  /**
   * The profile whose kernels settings (provider, gateway) apply; the current one by default.
   */
  profile?: string | null;
  /**
   * Where the kernel runs: local (this machine, in hdspd's sandbox) or gateway (the Jupyter server of the settings' kernels.gateway, or of the profile's). None: as the profile's or the settings' kernels.provider says.
   */
  provider?: ('gateway' | 'local') | null;
}
export interface InterruptKernel {
  commandName: 'InterruptKernel';
  kernelId: string;
}
/**
 * Restart a kernel hdsp started (also one that died); its state is lost.
 */
export interface RestartKernel {
  commandName: 'RestartKernel';
  kernelId: string;
}
/**
 * Shut down a kernel hdsp started, or detach from an attached one (which
 * keeps running).
 */
export interface ShutdownKernel {
  commandName: 'ShutdownKernel';
  kernelId: string;
}
/**
 * Run code and answer when it is done, with its outputs. Outputs also stream
 * as `executionOutput` events while it runs. Executions of one kernel run one at
 * a time in the order they came.
 */
export interface ExecuteCode {
  code: string;
  commandName: 'ExecuteCode';
  kernelId: string;
  /**
   * Seconds before the kernel is interrupted (and restarted if it does not stop); the daemon's default when absent.
   */
  timeout?: number | null;
}
/**
 * The variables of a task's kernel (the one its code runs in; no kernel is
 * started for it) or of a kernel by id. Modules, functions, classes and
 * IPython's own names are left out, and names starting with `_` unless
 * `includePrivate`.
 */
export interface ListVariables {
  commandName: 'ListVariables';
  includePrivate?: boolean;
  kernelId?: string | null;
  taskId?: string | null;
}
/**
 * The MCP servers a task in `workspace` has (the settings' and the workspace's
 * `.hdsp/mcp.json`), with their state; without `workspace`, the settings' only.
 * With `start`, servers not started yet are started, and the reply waits (up to
 * their startup timeout) until each is connected or failed.
 */
export interface ListMcpServers {
  commandName: 'ListMcpServers';
  start?: boolean;
  workspace?: string | null;
}
/**
 * Stop a server (if it runs) and start it again; the reply waits until it is
 * connected or failed. A failed server's backoff is reset.
 */
export interface RestartMcpServer {
  commandName: 'RestartMcpServer';
  name: string;
  workspace?: string | null;
}
/**
 * Trust (or, with `trusted` false, stop trusting) a server of a workspace's
 * `.hdsp/mcp.json`, exactly as it is written now: a change to its definition
 * (command, arguments, environment, URL, headers, alwaysAllow) makes it
 * untrusted again. A trusted server starts at once. With `fingerprint` (from
 * the server's status a person was shown), only that definition is trusted:
 * if the file changed since, the command is refused.
 */
export interface TrustMcpServer {
  commandName: 'TrustMcpServer';
  /**
   * Trust only if the entry's digest is still this one (McpServerStatus).
   */
  fingerprint?: string | null;
  name: string;
  trusted?: boolean;
  workspace: string;
}
export interface GetSettings {
  commandName: 'GetSettings';
}
/**
 * Change settings; an invalid result is refused whole, listing the fields.
 */
export interface UpdateSettings {
  commandName: 'UpdateSettings';
  data: UpdateSettingsData;
}
export interface UpdateSettingsData {
  /**
   * A JSON Merge Patch (RFC 7396) of the settings document: objects merge, `null` removes a key (its default applies), anything else replaces.
   */
  patch: {};
}
export interface ListProfiles {
  commandName: 'ListProfiles';
}
export interface SaveProfile {
  commandName: 'SaveProfile';
  data: SaveProfileData;
}
export interface SaveProfileData {
  profile: ProfileData;
  /**
   * Also make it the current profile.
   */
  select?: boolean;
}
/**
 * Replaces a saved profile of the same name whole.
 */
export interface ProfileData {
  /**
   * The API's base URL; absent for the provider's own (OpenAI, Anthropic).
   */
  baseUrl?: string | null;
  model: string;
  name: string;
  /**
   * Provider options, e.g. `thinking_budget` (Anthropic), `reasoning_effort` (OpenAI), `max_tokens`, and the bounds on the server's silence in seconds: `first_byte_timeout` (before its response begins, default 30) and `idle_timeout` (between two events of a reply, default 120).
   */
  options?: {};
  /**
   * "anthropic", "openai", "openai-compatible" or "demo".
   */
  provider: string;
  /**
   * The NAME of the secret holding the API key (`SetSecret`), never a key.
   */
  secret?: string | null;
}
export interface DeleteProfile {
  commandName: 'DeleteProfile';
  data: ProfileNameData;
}
export interface ProfileNameData {
  name: string;
}
/**
 * Make a profile the one new tasks use when they name none.
 */
export interface SelectProfile {
  commandName: 'SelectProfile';
  data: ProfileNameData;
}
/**
 * Store a secret in the daemon's keyring. The value is never echoed or logged.
 */
export interface SetSecret {
  commandName: 'SetSecret';
  data: SetSecretData;
}
export interface SetSecretData {
  name: string;
  value: string;
}
/**
 * Remove a secret from the keyring (an environment variable stays in effect).
 */
export interface DeleteSecret {
  commandName: 'DeleteSecret';
  data: SecretNameData;
}
export interface SecretNameData {
  name: string;
}
export interface ExportSettings {
  commandName: 'ExportSettings';
}
/**
 * Apply a settings document; parts that do not validate are left out and
 * reported in the result, the rest is applied.
 */
export interface ImportSettings {
  commandName: 'ImportSettings';
  data: ImportSettingsData;
}
export interface ImportSettingsData {
  /**
   * True merges it into the current settings (JSON Merge Patch); False replaces them, with defaults for what it leaves out.
   */
  merge?: boolean;
  /**
   * A settings document, as `ExportSettings` gives it.
   */
  settings: {};
}
/**
 * Roo's GetModels: the reply lists the models, and a daemon-wide
 * `modelsResponse` event carries them too, keyed by model id.
 */
export interface GetModels {
  commandName: 'GetModels';
  data?: GetModelsData;
}
export interface GetModelsData {
  /**
   * Only this provider's models ("anthropic", "openai", ...).
   */
  provider?: string | null;
}
export interface GetBlob {
  commandName: 'GetBlob';
  data: GetBlobData;
}
export interface GetBlobData {
  length?: number | null;
  /**
   * The first byte to send.
   */
  offset?: number;
  /**
   * The blob's sha256, 64 lowercase hex digits (from a reference).
   */
  sha256: string;
}
/**
 * A task's checkpoints, oldest first, with what changed at each.
 */
export interface ListCheckpoints {
  commandName: 'ListCheckpoints';
  data: ListCheckpointsData;
}
export interface ListCheckpointsData {
  taskId: string;
}
/**
 * What changed between two checkpoints (or a checkpoint and now), file by
 * file; notebooks cell by cell.
 */
export interface DiffCheckpoints {
  commandName: 'DiffCheckpoints';
  data: DiffCheckpointsData;
}
export interface DiffCheckpointsData {
  checkpoint: number;
  taskId: string;
  /**
   * Compare with this checkpoint; absent: with the workspace now.
   */
  to?: number | null;
}
/**
 * Restore a checkpoint. A checkpoint of the state before is taken first, so
 * that the restore can itself be undone. With `withKernel` the reply comes once
 * the replay is approved (or denied) and done.
 */
export interface RestoreCheckpoint {
  commandName: 'RestoreCheckpoint';
  data: RestoreCheckpointData;
}
export interface RestoreCheckpointData {
  checkpoint: number;
  /**
   * files: the workspace's files; history: rewind the task to the message of the checkpoint; both.
   */
  restore?: 'both' | 'files' | 'history';
  /**
   * Executions (by seq) not to replay: they are skipped with a note.
   */
  skip?: number[];
  taskId: string;
  /**
   * With `withKernel`: reply once the replay is approved (or denied) and done; false: reply as soon as its ask is posted (`replayPending`).
   */
  waitForReplay?: boolean;
  /**
   * Also restart the task's kernel and replay its executions up to the checkpoint, after the user approves them (an ask of the task).
   */
  withKernel?: boolean;
}
/**
 * Declare the notebooks a document host holds open now (replacing what it
 * declared before); `paths` empty withdraws the host.
 */
export interface HostDocuments {
  commandName: 'HostDocuments';
  /**
   * Chosen by the host; unique (a UUID); at most 128 characters.
   */
  hostId: string;
  /**
   * The declaration lasts this long unless declared again (0 < s <= 3600).
   */
  leaseSeconds?: number;
  /**
   * Absolute paths of the notebooks open at this host (at most 1000).
   */
  paths: string[];
  route: 'panel' | 'rtc';
}
/**
 * Roo's GetModes: the reply lists the modes, and a daemon-wide
 * `modesResponse` event carries them too.
 */
export interface GetModes {
  commandName: 'GetModes';
  data?: GetModesData;
}
export interface GetModesData {
  /**
   * Include this workspace's `.hdsp/modes.yaml` (or .json) modes.
   */
  workspace?: string | null;
}
/**
 * Roo's GetCommands: the reply lists the slash commands, and a daemon-wide
 * `commandsResponse` event carries them too.
 */
export interface GetCommands {
  commandName: 'GetCommands';
  data?: GetCommandsData;
}
export interface GetCommandsData {
  /**
   * Include this workspace's `.hdsp/commands/`.
   */
  workspace?: string | null;
}
/**
 * The exact system prompt a task's next model request sends (or a new task's).
 */
export interface GetSystemPrompt {
  commandName: 'GetSystemPrompt';
  data?: GetSystemPromptData;
}
export interface GetSystemPromptData {
  /**
   * Without a task: in this mode.
   */
  mode?: string | null;
  /**
   * The prompt this task's next request sends.
   */
  taskId?: string | null;
  /**
   * Without a task: the prompt a new task here would get.
   */
  workspace?: string | null;
}
/**
 * Put a task in another mode: its next request offers that mode's tools and
 * prompt; every client gets `taskModeSwitched`.
 */
export interface SwitchMode {
  commandName: 'SwitchMode';
  data: SwitchModeData;
  taskId: string;
}
export interface SwitchModeData {
  /**
   * The slug of the mode (GetModes lists them).
   */
  mode: string;
}
/**
 * A person replaces a task's todo list: every client gets
 * `taskTodoListUpdated`, and the model is told of the edit before its next request.
 */
export interface UpdateTodoList {
  commandName: 'UpdateTodoList';
  data: UpdateTodoListData;
  taskId: string;
}
export interface UpdateTodoListData {
  /**
   * The whole list as a markdown checklist: `- [ ] pending`, `- [-] in progress`, `- [x] done`, one item a line.
   */
  markdown?: string | null;
  /**
   * The whole list as items (instead of markdown).
   */
  todos?: TodoItem[] | null;
}
/**
 * One line of a task's todo list (Roo's TodoItem).
 */
export interface TodoItem {
  content: string;
  /**
   * Stable within the list: its position, from 1.
   */
  id: string;
  status?: 'completed' | 'in_progress' | 'pending';
}
/**
 * The agents, built-in and the settings'.
 */
export interface ListAgents {
  commandName: 'ListAgents';
}
/**
 * A task that starts no model turn: it waits, in state idle, for `CallTool`
 * (or a message). The reply names it.
 */
export interface CreateTask {
  commandName: 'CreateTask';
  data: CreateTaskData;
}
export interface CreateTaskData {
  /**
   * As in StartNewTask's configuration.
   */
  allowBroadWorkspace?: boolean;
  /**
   * The task's mode (GetModes lists them); `code` when absent.
   */
  mode?: string | null;
  /**
   * What the task is (its first message): who acts through it.
   */
  title: string;
  /**
   * Directory the task works in (absolute); as for StartNewTask.
   */
  workspace?: string | null;
}
/**
 * Sent by a client that is going away, so the daemon forgets it at once.
 */
export interface Disconnect {
  /**
   * The `clientId` of this connection's Ack.
   */
  clientId: string;
  origin?: 'client';
  type: 'Disconnect';
}
/**
 * One UI message. `ts` (milliseconds) is its id within its task.
 */
export interface ClineMessage {
  /**
   * An answered ask: how it was answered (Roo's askResponse: yesButtonClicked, noButtonClicked, messageResponse, objectResponse).
   */
  answer?: string | null;
  /**
   * An answered ask: who answered (the client's name, or "timeout" when the approval policy answered for nobody, "resume" when resuming did).
   */
  answeredBy?: string | null;
  apiProtocol?: ('anthropic' | 'openai') | null;
  ask?: string | null;
  checkpoint?: {} | null;
  /**
   * A user's message (text, user_feedback): the context it was sent with (the notebook, cell, selection, outline the user kept).
   */
  context?: PromptContext | null;
  contextCondense?: {} | null;
  contextTruncation?: {} | null;
  conversationHistoryIndex?: number | null;
  /**
   * A `command` ask: the directory the command would run in (absolute).
   */
  cwd?: string | null;
  images?: string[] | null;
  isAnswered?: boolean | null;
  isProtected?: boolean | null;
  partial?: boolean | null;
  progressStatus?: ProgressStatus | null;
  reasoning?: string | null;
  say?: string | null;
  /**
   * A user's message (text, user_feedback) sent over TCP to a team daemon: the name its sender's CURVE key is authorised under. Absent for messages sent on the daemon's own machine.
   */
  sentBy?: string | null;
  /**
   * A model's reply (text): why it ended, when it did not end by itself: "max_tokens" (cut at the output limit), "refusal" (the model refused), "content_filter" (the provider filtered it).
   */
  stopReason?: string | null;
  text?: string | null;
  /**
   * The tool call this message belongs to (its ask, its streamed output).
   */
  toolUseId?: string | null;
  /**
   * Milliseconds since the epoch, unique within the task: the message's id. An `updated` message event carries the ts of the message it replaces.
   */
  ts: number;
  type: 'ask' | 'say';
}
export interface ProgressStatus {
  icon?: string | null;
  text?: string | null;
}
/**
 * A slash command (Roo's Command).
 */
export interface CommandInfo {
  argumentHint?: string | null;
  description?: string | null;
  filePath?: string | null;
  /**
   * The mode a task switches to when the command is used.
   */
  mode?: string | null;
  name: string;
  source: 'built-in' | 'global' | 'project';
}
export interface CommandList {
  commands: CommandInfo[];
  problems?: string[];
}
/**
 * Not a message: the `result` of a Reply to command X, by X (its `commandName`).
 */
export interface CommandResults {
  AnswerDocumentEdit?: DocumentEditTaken;
  AttachKernel?: KernelInfo;
  CallTool?: ToolCallResult;
  CancelTask?: TaskRef;
  CloseTask?: TaskRef;
  CondenseTask?: TaskRef;
  CreateTask?: TaskRef;
  DeleteMessage?: TaskRef;
  DeleteProfile?: ProfileList;
  DeleteQueuedMessage?: TaskRef;
  DeleteSecret?: SecretInfo;
  DiffCheckpoints?: CheckpointDiff;
  EditMessage?: TaskRef;
  ExecuteCode?: ExecutionResult;
  ExportSettings?: SettingsExport;
  ForkTask?: TaskRef;
  GetBlob?: BlobData;
  GetCommands?: CommandList;
  GetModels?: ModelList;
  GetModes?: ModeList;
  GetSettings?: SettingsView;
  GetStatus?: StatusResult;
  GetSystemPrompt?: SystemPromptText;
  GetTask?: TaskSnapshot;
  GetTaskPage?: TaskPage;
  HostDocuments?: DocumentsHosted;
  ImportSettings?: ImportResult;
  InterruptKernel?: KernelRef;
  ListAgents?: AgentList;
  ListCheckpoints?: CheckpointList;
  ListKernels?: KernelList;
  ListMcpServers?: McpServerList;
  ListProfiles?: ProfileList;
  ListRemoteKernels?: RemoteKernelList;
  ListTasks?: TaskList;
  ListVariables?: VariableList;
  Ping?: Pong;
  Replay?: ReplayPage;
  RespondToAsk?: TaskRef;
  RestartKernel?: KernelRef;
  RestartMcpServer?: McpServerStatus;
  RestoreCheckpoint?: CheckpointRestoreResult;
  ResumeTask?: TaskRef;
  RewindTask?: TaskRef;
  SaveProfile?: ProfileInfo;
  SelectProfile?: ProfileList;
  SendMessage?: TaskRef;
  SetSecret?: SecretInfo;
  Shutdown?: null;
  ShutdownKernel?: KernelRef;
  StartKernel?: KernelInfo;
  StartNewTask?: TaskRef;
  SwitchMode?: TaskRef;
  TrustMcpServer?: McpServerStatus;
  UpdateSettings?: SettingsView;
  UpdateTodoList?: TaskRef;
}
/**
 * Whether the daemon was still waiting for that answer (false: it gave up, or
 * the request was not this host's).
 */
export interface DocumentEditTaken {
  taken: boolean;
}
export interface KernelInfo {
  connectionFile?: string | null;
  /**
   * Working directory of the kernel process, when hdsp started it.
   */
  cwd?: string | null;
  kernelId: string;
  /**
   * Kernelspec name ("python3"); for an attached kernel, its language if known.
   */
  kernelName: string;
  /**
   * True when hdsp started the kernel: it shuts it down when the daemon stops. An attached kernel (a notebook's) is only ever detached from.
   */
  owned: boolean;
  /**
   * local: on this machine; gateway: on the Jupyter server `serverUrl`, as the kernel `remoteId` there.
   */
  provider?: 'gateway' | 'local';
  /**
   * gateway: the kernel's id on its Jupyter server.
   */
  remoteId?: string | null;
  /**
   * gateway: the Jupyter server's URL (without credentials).
   */
  serverUrl?: string | null;
  status: KernelState;
  /**
   * Tasks whose code runs in this kernel.
   */
  taskIds?: string[];
}
export interface ToolCallResult {
  images?: RelayedImage[];
  isError?: boolean;
  /**
   * done: the call is over, its result may be an error (the tool failed, or the call was invalid and did not run: arguments, mode, repetition); denied: a person (or the policy, or an approval's timeout) said no; cancelled: CancelTask stopped it.
   */
  status: 'cancelled' | 'denied' | 'done';
  taskId: string;
  /**
   * The result as the model would read it. Produced by the tool, a kernel or a file: untrusted text.
   */
  text?: string;
  tool: string;
}
export interface RelayedImage {
  /**
   * The image, base64 (no data: prefix).
   */
  data: string;
  mediaType: string;
}
export interface TaskRef {
  /**
   * SendMessage to a busy task: the message waits in the task's queue.
   */
  queued?: boolean | null;
  state?: TaskState | null;
  taskId: string;
}
export interface ProfileList {
  /**
   * The profile new tasks use when they name none; absent when there is none.
   */
  current?: string | null;
  /**
   * The file where the daemon's keyring keeps keys unencrypted, if it does (see `SecretInfo.plaintext_keyring`).
   */
  plaintextKeyring?: string | null;
  profiles: ProfileInfo[];
}
/**
 * A profile as the daemon uses it.
 */
export interface ProfileInfo {
  baseUrl?: string | null;
  /**
   * True for the profile new tasks use when they name none.
   */
  current?: boolean;
  model: string;
  name: string;
  options?: {};
  provider: string;
  secret?: string | null;
  /**
   * Whether the named secret has a value (keyring or environment); absent when the profile names no secret.
   */
  secretSet?: boolean | null;
  /**
   * "settings" (saved by a user), "builtin" (`demo`) or "environment" (the `default` profile made from HDSP_BASE_URL/HDSP_MODEL/HDSP_API_KEY).
   */
  source: 'builtin' | 'environment' | 'settings';
}
/**
 * A secret by name: whether the daemon has a value for it, never the value.
 */
export interface SecretInfo {
  /**
   * Environment variables the daemon reads when the keyring has no value.
   */
  envVars?: string[];
  /**
   * Why the daemon could not tell whether it is set (the keyring failed).
   */
  error?: string | null;
  isSet: boolean;
  /**
   * The keyring backend that stored it (its class, e.g. "keyring.backends.SecretService.Keyring"); set in the reply to SetSecret.
   */
  keyringBackend?: string | null;
  name: string;
  /**
   * The file where the daemon's keyring keeps secrets unencrypted, when its backend is a plain-text file (keyrings.alt's PlaintextKeyring); absent otherwise.
   */
  plaintextKeyring?: string | null;
  /**
   * Where the value comes from: "keyring" or "environment"; absent when not set.
   */
  source?: ('environment' | 'keyring') | null;
}
export interface ExecutionResult {
  /**
   * A kernel on a Jupyter server: the connection to the server dropped while the code ran, and came back. What the server published after it saw the drop was replayed; what it had sent at that moment may be missing from `outputs`.
   */
  connectionDropped?: boolean;
  /**
   * For each display id the execution's messages carried, the last data it got (as update_display_data outputs): outputs of earlier cells that show one of these display ids now show this data, as Jupyter updates a display wherever it is shown.
   */
  displayUpdates?: KernelOutput[];
  executionCount?: number | null;
  executionId: string;
  kernelId: string;
  /**
   * The kernel did not stop after an interrupt and was restarted: its state is gone.
   */
  kernelRestarted?: boolean;
  /**
   * Every output, as a notebook keeps them: clear_output and update_display_data applied, consecutive stream text of one name merged.
   */
  outputs?: KernelOutput[];
  /**
   * ok, error (the code raised), timeout (stopped after its time limit), cancelled (stopped by a cancel), died (the kernel died), restarted (the kernel was restarted while the code ran).
   */
  status: 'cancelled' | 'died' | 'error' | 'ok' | 'restarted' | 'timeout';
}
/**
 * One iopub output message: `outputType` is its msg_type.
 */
export interface KernelOutput {
  /**
   * display_data, update_display_data, execute_result: the mime bundle.
   */
  data?: {} | null;
  /**
   * display_data, execute_result, update_display_data: the display this output shows or updates (the message's transient display_id).
   */
  displayId?: string | null;
  /**
   * error: exception name, value and the traceback lines as the kernel sent them.
   */
  ename?: string | null;
  evalue?: string | null;
  executionCount?: number | null;
  metadata?: {} | null;
  /**
   * stream: "stdout" or "stderr".
   */
  name?: string | null;
  outputType: 'clear_output' | 'display_data' | 'error' | 'execute_result' | 'stream' | 'update_display_data';
  /**
   * stream: the text.
   */
  text?: string | null;
  traceback?: string[] | null;
  /**
   * clear_output: clear when the next output arrives instead of now.
   */
  wait?: boolean | null;
}
/**
 * A portable copy of the settings: secrets appear only as names.
 */
export interface SettingsExport {
  /**
   * The secret names the profiles refer to; set them on the new machine with `hdsp secret set NAME`.
   */
  secretNames?: string[];
  settings: {};
}
export interface ModelList {
  models: ModelEntry[];
}
/**
 * One model of the daemon's model table (with the user's overrides).
 */
export interface ModelEntry {
  cacheReadPrice?: number;
  cacheWritePrice?: number;
  contextWindow: number;
  id: string;
  /**
   * USD per million tokens.
   */
  inputPrice?: number;
  maxOutput: number;
  outputPrice?: number;
  provider: string;
  /**
   * "builtin" (hdsp's table) or "settings" (the user's `models` section).
   */
  source?: 'builtin' | 'settings';
  supportsImages?: boolean;
}
export interface ModeList {
  modes: ModeInfo[];
  /**
   * Why a custom modes file or setting was left out (path, line, problem).
   */
  problems?: string[];
}
/**
 * A mode as `modesResponse` and `GetModes` list it: Roo's `{slug, name}`, and
 * what hdsp adds.
 */
export interface ModeInfo {
  customInstructions?: string | null;
  description?: string | null;
  /**
   * Files the mode may edit (a Python regex on the workspace path).
   */
  fileRegex?: string | null;
  /**
   * Tool groups the mode may use: read, edit, command, kernel, notebook, mcp, agents.
   */
  groups?: string[];
  name: string;
  roleDefinition?: string;
  slug: string;
  /**
   * Where it is defined: hdsp, the settings, or the workspace file.
   */
  source?: 'built-in' | 'global' | 'project';
  /**
   * The tools a task in this mode is offered, by name.
   */
  tools?: string[];
  whenToUse?: string | null;
}
/**
 * The settings document, with secrets shown only as names.
 */
export interface SettingsView {
  /**
   * The settings file.
   */
  path: string;
  /**
   * Problems the daemon found in the file when it started (a corrupt file moved aside, parts it had to drop), for people to read.
   */
  problems?: string[];
  /**
   * Every secret name the settings refer to, plus the conventional ones ("anthropic", "openai", "default").
   */
  secrets: SecretInfo[];
  settings: {};
}
export interface StatusResult {
  clients: number;
  dataDir: string;
  headSeq: number;
  pid: number;
  /**
   * The file where the daemon's keyring keeps secrets unencrypted, when its backend is a plain-text file; absent otherwise.
   */
  plaintextKeyring?: string | null;
  protocolVersion: number;
  runtimeDir: string;
  /**
   * None from a daemon older than the sandbox.
   */
  sandbox?: SandboxStatus | null;
  serverVersion: string;
  /**
   * Whether the daemon can write its database now (see StorageState).
   */
  storage?: StorageHealth | null;
  tasksRunning: number;
  tasksTotal: number;
  /**
   * The TCP endpoints under CURVE, when the daemon listens on TCP.
   */
  tcp?: TcpStatus | null;
  uptimeSeconds: number;
}
/**
 * How shell commands and kernels are confined (`sandbox.*` settings).
 */
export interface SandboxStatus {
  /**
   * "bwrap" (bubblewrap: namespaces and a mount layout), "none" (mode off) or "unavailable" (then commands and kernels are refused, see `problem`).
   */
  mechanism?: string;
  /**
   * "workspace-write", "read-only" or "off".
   */
  mode: string;
  /**
   * Whether sandboxed code may use the network.
   */
  network?: boolean;
  /**
   * Why the sandbox cannot run, and how to fix it; None when it can.
   */
  problem?: string | null;
}
export interface StorageHealth {
  /**
   * What a person can do about it.
   */
  advice?: string | null;
  /**
   * What failed, in SQLite's words (e.g. "database or disk is full").
   */
  reason?: string | null;
  /**
   * Since when (milliseconds since the epoch); None while ok.
   */
  since?: number | null;
  state?: StorageState;
}
/**
 * The daemon's TCP endpoints (the `tcp.listen` setting), always under CURVE.
 */
export interface TcpStatus {
  /**
   * How many client keys the authorised keys file lets in now.
   */
  authorizedClients: number;
  /**
   * The control socket's TCP endpoint.
   */
  control: string;
  /**
   * The events socket's TCP endpoint (port + 1).
   */
  events: string;
  /**
   * The daemon's public CURVE key (z85): a remote's --server-key.
   */
  serverPublicKey: string;
}
export interface SystemPromptText {
  mode: string;
  text: string;
}
export interface TaskSnapshot {
  /**
   * The newest `seq` this snapshot includes: Replay with this as `sinceSeq` (and the task's id) to get what happened after it.
   */
  headSeq: number;
  item: HistoryItem;
  /**
   * Every UI message, including the current text of one still streaming.
   */
  messages: ClineMessage[];
  /**
   * The ask that waits for an answer, if any (also among `messages`).
   */
  pendingAsk?: ClineMessage | null;
  /**
   * Messages waiting for the task's current turn to end.
   */
  queue?: QueuedMessage[];
  state: TaskState;
}
/**
 * One row per task: Roo's HistoryItem, plus hdsp's `state`.
 */
export interface HistoryItem {
  /**
   * hdsp: the agent the task runs (seed 002); None: no agent, its mode's role.
   */
  agent?: string | null;
  apiConfigName?: string | null;
  awaitingChildId?: string | null;
  cacheReads?: number | null;
  cacheWrites?: number | null;
  childIds?: string[] | null;
  completedByChildId?: string | null;
  completionResultSummary?: string | null;
  /**
   * The task's own custom instructions (its configuration's).
   */
  customInstructions?: string | null;
  delegatedToId?: string | null;
  /**
   * The task's id (a UUID).
   */
  id: string;
  /**
   * hdsp: where the task's kernels run, as its configuration chose (None: as its profile's or the settings' kernels.provider says).
   */
  kernelProvider?: ('gateway' | 'local') | null;
  mode?: string | null;
  /**
   * hdsp: the file restriction of the mode's edits when the task entered it (with `modeGroups`); None: none.
   */
  modeFileRegex?: string | null;
  /**
   * hdsp: the tool groups the task's mode had when the task entered it (started in it, or switched to it), with `modeFileRegex`: the most a workspace mode gives the task later, whatever its file then says. None: not recorded.
   */
  modeGroups?: string[] | null;
  /**
   * 1 for the daemon's first task, then counting up.
   */
  number: number;
  /**
   * hdsp: the parent's call_agent tool call that started this child task (its tool_use id), with `parentTaskId`.
   */
  parentCallId?: string | null;
  parentTaskId?: string | null;
  /**
   * hdsp: what the task returned to its caller when it finished (its finish message, or its last reply's text).
   */
  result?: string | null;
  rootTaskId?: string | null;
  size?: number | null;
  state?: TaskState | null;
  status?: ('active' | 'completed' | 'delegated') | null;
  /**
   * The task's first message (its title).
   */
  task: string;
  /**
   * hdsp: the task's todo list (update_todo_list, UpdateTodoList).
   */
  todos?: TodoItem[] | null;
  /**
   * Input tokens the task's model requests used.
   */
  tokensIn?: number;
  /**
   * Output tokens the model generated.
   */
  tokensOut?: number;
  /**
   * Estimated cost in USD.
   */
  totalCost?: number;
  /**
   * When the task was created, ms since the epoch.
   */
  ts: number;
  workspace?: string | null;
}
export interface QueuedMessage {
  context?: PromptContext | null;
  delivery?: ('queue' | 'steer') | null;
  id: string;
  images?: string[] | null;
  sentBy?: string | null;
  text: string;
  timestamp: number;
}
export interface TaskPage {
  /**
   * The newest `seq` this page includes; replay from here to continue.
   */
  headSeq: number;
  /**
   * The page's messages, oldest first (a message still streaming as it is now).
   */
  messages: ClineMessage[];
  /**
   * Pass as `cursor` for the next page; absent on the last page.
   */
  nextCursor?: string | null;
  /**
   * Index of the first of `messages` in the task's whole history.
   */
  start: number;
  /**
   * How many messages the task's history holds.
   */
  total: number;
}
export interface DocumentsHosted {
  hostId: string;
  paths: number;
}
export interface ImportResult {
  /**
   * Dotted paths of what was taken: top-level keys, "profiles.NAME", "models.NAME".
   */
  applied?: string[];
  /**
   * What was left out, and why; the rest was applied.
   */
  rejected?: Rejection[];
  /**
   * The settings after the import.
   */
  settings: {};
}
export interface Rejection {
  /**
   * Dotted path of what was left out: "profiles.work", "retry.max_attempts".
   */
  path: string;
  reason: string;
}
export interface KernelRef {
  kernelId: string;
  status: KernelState;
}
export interface KernelList {
  kernels: KernelInfo[];
}
export interface McpServerList {
  /**
   * Why the workspace's .hdsp/mcp.json could not be read, if it could not.
   */
  configError?: string | null;
  servers?: McpServerStatus[];
}
/**
 * One configured server and how it is doing.
 */
export interface McpServerStatus {
  /**
   * Its tools configured to run without asking (`*`: all).
   */
  alwaysAllow?: string[];
  /**
   * The directory it runs in, as configured.
   */
  cwd?: string | null;
  /**
   * The environment variables its configuration sets.
   */
  envNames?: string[];
  /**
   * Why it failed or is untrusted.
   */
  error?: string | null;
  /**
   * A digest of its whole configuration entry: TrustMcpServer with it trusts this entry only.
   */
  fingerprint?: string;
  /**
   * The HTTP headers its configuration sends.
   */
  headerNames?: string[];
  name: string;
  /**
   * How many resources it lists.
   */
  resources?: number;
  /**
   * Restarts after a crash since hdspd started.
   */
  restarts?: number;
  /**
   * failed: seconds until the next attempt, if any.
   */
  retryInSeconds?: number | null;
  /**
   * global: the settings' mcp.servers; workspace: a .hdsp/mcp.json; task: offered to one task by a client (taskId), an ACP host's.
   */
  scope: 'global' | 'task' | 'workspace';
  /**
   * The keyring secrets (`${secret:NAME}`) it is given when it starts.
   */
  secrets?: string[];
  /**
   * The server's name and version for itself (untrusted).
   */
  serverInfo?: string | null;
  /**
   * disabled (configured off); untrusted (a workspace server nobody trusted yet: `hdsp mcp trust NAME`); stopped (not started yet: servers start when a task first needs them); connecting; connected; failed (see error; retryInSeconds: when it is tried again, restarts backing off).
   */
  state: 'connected' | 'connecting' | 'disabled' | 'failed' | 'stopped' | 'untrusted';
  /**
   * What it runs (command and arguments) or its URL.
   */
  target?: string;
  /**
   * The task an offered server is for.
   */
  taskId?: string | null;
  tools?: McpToolInfo[];
  transport?: 'http' | 'stdio';
  /**
   * The workspace of a workspace server.
   */
  workspace?: string | null;
}
/**
 * One tool of a server.
 */
export interface McpToolInfo {
  /**
   * The configuration lets it run without asking.
   */
  alwaysAllow?: boolean;
  /**
   * The server's description (untrusted).
   */
  description?: string;
  /**
   * The tool's name on its server.
   */
  name: string;
  /**
   * The name the model calls it by: mcp__SERVER__TOOL.
   */
  offeredAs: string;
}
export interface RemoteKernelList {
  kernels?: RemoteKernel[];
  /**
   * The server's URL (without credentials).
   */
  serverUrl: string;
  sessions?: RemoteSession[];
  /**
   * Why the server's sessions are not listed (Kernel Gateway lists them only with list_kernels on), if they are not.
   */
  sessionsError?: string | null;
}
/**
 * A kernel a Jupyter server runs, as its REST API describes it (the
 * server's text: untrusted).
 */
export interface RemoteKernel {
  connections?: number | null;
  executionState?: string | null;
  /**
   * hdsp's id for this kernel (ListKernels), when hdsp uses it.
   */
  kernelId?: string | null;
  lastActivity?: string | null;
  name?: string | null;
  remoteId: string;
}
/**
 * A Jupyter server's session: which notebook (or console) uses which kernel.
 */
export interface RemoteSession {
  name?: string | null;
  path?: string | null;
  remoteKernelId?: string | null;
  sessionId: string;
  type?: string | null;
}
export interface TaskList {
  /**
   * Pass as `cursor` to get the next (older) page; absent on the last page.
   */
  nextCursor?: string | null;
  tasks: HistoryItem[];
}
export interface VariableList {
  /**
   * The kernel inspected; absent when the task has no kernel yet.
   */
  kernelId?: string | null;
  message?: string | null;
  /**
   * Variables left out by the limits below.
   */
  omitted?: number;
  /**
   * ok; no_kernel (the task has run no code yet); busy (the kernel runs code: nothing was queued or interrupted, ask again later); timeout (the kernel did not answer in time; nothing was interrupted); error (see message).
   */
  status?: 'busy' | 'error' | 'no_kernel' | 'ok' | 'timeout';
  /**
   * Why the list stops early: too many variables, too many bytes, or its time ran out.
   */
  truncated?: ('count' | 'size' | 'time') | null;
  variables?: VariableSummary[];
}
/**
 * One variable of the kernel, in a line.
 */
export interface VariableSummary {
  /**
   * Data frames: the first columns with their dtypes.
   */
  columns?: VariableColumn[];
  /**
   * Data frames: columns left out of `columns`.
   */
  columnsOmitted?: number;
  /**
   * Arrays and series: the dtype.
   */
  dtype?: string | null;
  /**
   * What could not be shown and why: "preview: raised ValueError", "preview: timed out after 1 s".
   */
  error?: string | null;
  /**
   * Data frames and series: their first rows, as text.
   */
  head?: string | null;
  /**
   * len() of a container or string.
   */
  length?: number | null;
  /**
   * Bytes it takes: a frame's memory_usage (not deep), an array's nbytes, a polars estimated_size, else sys.getsizeof (the object alone).
   */
  memory?: number | null;
  name: string;
  /**
   * A short repr, cut (arrays: numpy's summary).
   */
  preview?: string | null;
  /**
   * Frames and arrays (anything with a shape): their shape.
   */
  shape?: number[] | null;
  /**
   * Its type: "int", "pandas.DataFrame", "numpy.ndarray", "Point".
   */
  type: string;
}
/**
 * One column of a data frame.
 */
export interface VariableColumn {
  dtype: string;
  name: string;
}
export interface Pong {
  /**
   * The daemon's clock, in milliseconds since the epoch.
   */
  serverTime: number;
}
export interface ReplayPage {
  /**
   * Durable events, oldest first.
   */
  events: TaskEvent[];
  /**
   * The newest `seq` the daemon had written when it read this page (of any topic).
   */
  headSeq: number;
  /**
   * The page is full: more events may follow. Ask again with the last event's `seq` as `sinceSeq`.
   */
  more?: boolean;
}
/**
 * The envelope of an event, published on the `events` socket under the topic
 * of its task id (empty for daemon-wide events).
 */
export interface TaskEvent {
  /**
   * One of these, told apart by the value of `eventName`.
   */
  data:
    | TaskCreated
    | TaskStarted
    | TaskCompleted
    | TaskAborted
    | TaskFocused
    | TaskUnfocused
    | TaskActive
    | TaskInteractive
    | TaskResumable
    | TaskIdle
    | TaskPaused
    | TaskUnpaused
    | TaskSpawned
    | TaskDelegated
    | TaskDelegationCompleted
    | TaskDelegationResumed
    | MessageEvent
    | TaskModeSwitched
    | TaskAskResponded
    | QueuedMessagesUpdated
    | TaskToolFailed
    | TaskTokenUsageUpdated
    | CommandsResponse
    | ModesResponse
    | ModelsResponse
    | TaskClosed
    | TaskRewound
    | TaskMessagesDeleted
    | CheckpointSaved
    | CheckpointRestored
    | DaemonShuttingDown
    | KernelStarted
    | KernelStatus
    | KernelShutdown
    | ExecutionOutput
    | SettingsChanged
    | StorageChanged
    | EventsSynced
    | DocumentEditRequested
    | TaskTodoListUpdated
    | McpServerChanged;
  origin?: 'server';
  /**
   * `seq` of the previous durable event of the same topic (task id, or the empty daemon-wide topic); 0 for the topic's first. A client following one task has missed events exactly when prevSeq is greater than the last seq it saw of that task. On a live-only event: the last durable event of its topic published before it, so a client that has a later version of the message from the log can ignore it.
   */
  prevSeq?: number | null;
  /**
   * Roo's field for events relayed for another client; hdsp leaves it out.
   */
  relayClientId?: string | null;
  /**
   * Position of a durable event in the daemon's event log: global (all topics), starting at 1, gap-free, increasing in publication order. Absent on live-only events (partial message updates, executionOutput, busy/idle kernelStatus, a failing storageChanged, eventsSynced).
   */
  seq?: number | null;
  type: 'TaskEvent';
}
export interface TaskCreated {
  eventName: 'taskCreated';
  /**
   * @minItems 1
   * @maxItems 1
   */
  payload: [string];
}
export interface TaskStarted {
  eventName: 'taskStarted';
  /**
   * @minItems 1
   * @maxItems 1
   */
  payload: [string];
}
export interface TaskCompleted {
  eventName: 'taskCompleted';
  /**
   * @minItems 4
   * @maxItems 4
   */
  payload: [
    string,
    TokenUsage,
    {
      [k: string]: ToolUsageEntry | undefined;
    },
    CompletedInfo
  ];
}
export interface TokenUsage {
  contextTokens: number;
  totalCacheReads?: number | null;
  totalCacheWrites?: number | null;
  totalCost: number;
  totalTokensIn: number;
  totalTokensOut: number;
}
export interface ToolUsageEntry {
  attempts: number;
  failures: number;
}
export interface CompletedInfo {
  isSubtask: boolean;
}
export interface TaskAborted {
  eventName: 'taskAborted';
  /**
   * @minItems 1
   * @maxItems 1
   */
  payload: [string];
}
export interface TaskFocused {
  eventName: 'taskFocused';
  /**
   * @minItems 1
   * @maxItems 1
   */
  payload: [string];
}
export interface TaskUnfocused {
  eventName: 'taskUnfocused';
  /**
   * @minItems 1
   * @maxItems 1
   */
  payload: [string];
}
export interface TaskActive {
  eventName: 'taskActive';
  /**
   * @minItems 1
   * @maxItems 1
   */
  payload: [string];
}
export interface TaskInteractive {
  eventName: 'taskInteractive';
  /**
   * @minItems 1
   * @maxItems 1
   */
  payload: [string];
}
export interface TaskResumable {
  eventName: 'taskResumable';
  /**
   * @minItems 1
   * @maxItems 1
   */
  payload: [string];
}
export interface TaskIdle {
  eventName: 'taskIdle';
  /**
   * @minItems 1
   * @maxItems 1
   */
  payload: [string];
}
export interface TaskPaused {
  eventName: 'taskPaused';
  /**
   * @minItems 1
   * @maxItems 1
   */
  payload: [string];
}
export interface TaskUnpaused {
  eventName: 'taskUnpaused';
  /**
   * @minItems 1
   * @maxItems 1
   */
  payload: [string];
}
/**
 * [taskId, childId]
 */
export interface TaskSpawned {
  eventName: 'taskSpawned';
  /**
   * @minItems 2
   * @maxItems 2
   */
  payload: [string, string];
}
/**
 * [parentId, childId]
 */
export interface TaskDelegated {
  eventName: 'taskDelegated';
  /**
   * @minItems 2
   * @maxItems 2
   */
  payload: [string, string];
}
/**
 * [parentId, childId, completionResultSummary]
 */
export interface TaskDelegationCompleted {
  eventName: 'taskDelegationCompleted';
  /**
   * @minItems 3
   * @maxItems 3
   */
  payload: [string, string, string];
}
/**
 * [parentId, childId]
 */
export interface TaskDelegationResumed {
  eventName: 'taskDelegationResumed';
  /**
   * @minItems 2
   * @maxItems 2
   */
  payload: [string, string];
}
export interface MessageEvent {
  eventName: 'message';
  /**
   * @minItems 1
   * @maxItems 1
   */
  payload: [MessagePayload];
}
export interface MessagePayload {
  action: 'created' | 'updated';
  message: ClineMessage;
  taskId: string;
}
export interface TaskModeSwitched {
  eventName: 'taskModeSwitched';
  /**
   * @minItems 2
   * @maxItems 2
   */
  payload: [string, string];
}
export interface TaskAskResponded {
  eventName: 'taskAskResponded';
  /**
   * @minItems 1
   * @maxItems 1
   */
  payload: [string];
}
export interface QueuedMessagesUpdated {
  eventName: 'queuedMessagesUpdated';
  /**
   * @minItems 2
   * @maxItems 2
   */
  payload: [string, QueuedMessage[]];
}
/**
 * [taskId, toolName, error]
 */
export interface TaskToolFailed {
  eventName: 'taskToolFailed';
  /**
   * @minItems 3
   * @maxItems 3
   */
  payload: [string, string, string];
}
export interface TaskTokenUsageUpdated {
  eventName: 'taskTokenUsageUpdated';
  /**
   * @minItems 3
   * @maxItems 3
   */
  payload: [
    string,
    TokenUsage,
    {
      [k: string]: ToolUsageEntry | undefined;
    }
  ];
}
export interface CommandsResponse {
  eventName: 'commandsResponse';
  /**
   * @minItems 1
   * @maxItems 1
   */
  payload: [unknown[]];
}
export interface ModesResponse {
  eventName: 'modesResponse';
  /**
   * @minItems 1
   * @maxItems 1
   */
  payload: [unknown[]];
}
export interface ModelsResponse {
  eventName: 'modelsResponse';
  /**
   * @minItems 1
   * @maxItems 1
   */
  payload: [{}];
}
/**
 * The task was closed: it holds no resources until it is resumed.
 */
export interface TaskClosed {
  eventName: 'taskClosed';
  /**
   * @minItems 1
   * @maxItems 1
   */
  payload: [string];
}
/**
 * [taskId, ts]: the task's messages from `ts` on were removed (RewindTask,
 * EditMessage): drop them from views; a message with an earlier ts that changed
 * comes as its own `message` event.
 */
export interface TaskRewound {
  eventName: 'taskRewound';
  /**
   * @minItems 2
   * @maxItems 2
   */
  payload: [string, number];
}
/**
 * [taskId, [ts, ...]]: these messages of the task were removed (DeleteMessage):
 * drop them from views; the others stay as they were.
 */
export interface TaskMessagesDeleted {
  eventName: 'taskMessagesDeleted';
  /**
   * @minItems 2
   * @maxItems 2
   */
  payload: [string, number[]];
}
/**
 * The last event before the daemon exits: [reason]. Published daemon-wide.
 */
export interface DaemonShuttingDown {
  eventName: 'daemonShuttingDown';
  /**
   * @minItems 1
   * @maxItems 1
   */
  payload: [string];
}
/**
 * hdsp started a kernel or attached to one: [kernel]. Daemon-wide.
 */
export interface KernelStarted {
  eventName: 'kernelStarted';
  /**
   * @minItems 1
   * @maxItems 1
   */
  payload: [KernelInfo];
}
/**
 * [kernelId, status]. Daemon-wide. busy and idle flip with every execution
 * and are live-only (ListKernels has the current one); starting, restarting and
 * dead are durable.
 */
export interface KernelStatus {
  eventName: 'kernelStatus';
  /**
   * @minItems 2
   * @maxItems 2
   */
  payload: [string, KernelState];
}
/**
 * hdsp shut the kernel down, or detached from one it did not start: [kernelId].
 * Daemon-wide.
 */
export interface KernelShutdown {
  eventName: 'kernelShutdown';
  /**
   * @minItems 1
   * @maxItems 1
   */
  payload: [string];
}
/**
 * Outputs of a running execution, a few per second at most. Live-only: the
 * execution's result (a tool result, the cell_output message, the ExecuteCode
 * reply) is what lasts. Published under the task's topic when a task runs the
 * code, daemon-wide otherwise.
 */
export interface ExecutionOutput {
  eventName: 'executionOutput';
  /**
   * @minItems 1
   * @maxItems 1
   */
  payload: [ExecutionOutputData];
}
export interface ExecutionOutputData {
  executionId: string;
  kernelId: string;
  /**
   * The output messages that arrived since the previous event, in order.
   */
  outputs?: KernelOutput[];
  /**
   * The task whose tool call runs the code, if any (the event's topic).
   */
  taskId?: string | null;
}
/**
 * Settings, a profile or a secret changed (never with a secret's value), or
 * the daemon recovered from a corrupt settings file at start: [change].
 * Daemon-wide.
 */
export interface SettingsChanged {
  eventName: 'settingsChanged';
  /**
   * @minItems 1
   * @maxItems 1
   */
  payload: [SettingsChange];
}
/**
 * The payload of `settingsChanged`: what changed, never a secret's value.
 *
 * `reason` is one of "updated", "imported", "profileSaved", "profileDeleted",
 * "profileSelected", "secretSet", "secretDeleted", or "recovered" (the daemon
 * found the settings file corrupt or invalid at start; `message` says where the
 * old file went). Clients re-read what they show with `GetSettings` or
 * `ListProfiles`.
 */
export interface SettingsChange {
  /**
   * The client whose command made the change.
   */
  clientId?: string | null;
  /**
   * The profile new tasks use after the change.
   */
  currentProfile?: string | null;
  /**
   * Top-level settings keys that changed, or the names of the profile or secret.
   */
  keys?: string[];
  message?: string | null;
  reason: string;
}
/**
 * The daemon's storage stopped or started taking writes: [health].
 * Daemon-wide. A failure is live-only (it cannot be written: that is the
 * failure), and GetStatus reports it to a client that connects later; the
 * recovery is durable.
 */
export interface StorageChanged {
  eventName: 'storageChanged';
  /**
   * @minItems 1
   * @maxItems 1
   */
  payload: [StorageHealth];
}
/**
 * The answer to a sync probe: [topic]. A client subscribes to a topic of its
 * own that starts with `SYNC_PREFIX` ("\u0000sync."); the daemon publishes this
 * on that topic once it sees the subscription, so every subscription the client
 * made before it is in effect. Live-only, never in the log. A client subscribed
 * to everything also receives other clients' probes: ignore topics that start
 * with "\u0000".
 */
export interface EventsSynced {
  eventName: 'eventsSynced';
  /**
   * The probe's topic (bytes that are not UTF-8 replaced by U+FFFD).
   *
   * @minItems 1
   * @maxItems 1
   */
  payload: [string];
}
/**
 * A notebook tool asks a document host to change (or read) a notebook open
 * there: [request] (see hdsp.protocol.documents). Daemon-wide and live-only: a
 * host that misses it does not answer, and the tool falls back to the file.
 */
export interface DocumentEditRequested {
  eventName: 'documentEditRequested';
  /**
   * @minItems 1
   * @maxItems 1
   */
  payload: [DocumentEditRequest];
}
export interface DocumentEditRequest {
  edit: DocumentEdit;
  /**
   * Unix time after which the host must not apply the edit.
   */
  expiresAt: number;
  hostId: string;
  /**
   * Absolute path of the notebook.
   */
  path: string;
  requestId: string;
  taskId?: string | null;
}
/**
 * One change to an open notebook (or a read of it).
 *
 * - read: answer with every cell, outputs included.
 * - insert: a new cell (`newId`, `cellType`, `source`) after the cell `afterId`
 *   (at the top when absent).
 * - edit: replace the source (and type) of `cellId`; clears a code cell's outputs.
 * - delete: remove `cellId`.
 * - move: put `cellId` after `afterId` (at the top when absent).
 * - run: the agent is about to run `cellId`: clear its outputs and execution count,
 *   and show it running.
 * - outputs: set the outputs and execution count of `cellId` (as they stream);
 *   `running`: the cell still runs (its final outputs come with `running` false).
 * - snapshot: answer with the whole notebook (`notebook`) as the host would save
 *   it; changes nothing. (Checkpoints.)
 * - replace: make the document `notebook` (cells, outputs, metadata), then save
 *   it to its file as the user's save does; answer once it is saved. (A restore.)
 *
 * `expectedSha256` (edit, delete, move, run): the SHA-256 of the UTF-8 source the
 * agent last read of `cellId`; the host answers `conflict` if the live source
 * differs. `marker` goes into the cell's `metadata.hdsp` (insert, edit).
 */
export interface DocumentEdit {
  afterId?: string | null;
  cellId?: string | null;
  cellType?: string | null;
  executionCount?: number | null;
  expectedSha256?: string | null;
  marker?: {} | null;
  newId?: string | null;
  /**
   * The whole notebook (nbformat 4 JSON); only for a `replace`.
   */
  notebook?: {} | null;
  op: 'delete' | 'edit' | 'insert' | 'move' | 'outputs' | 'read' | 'replace' | 'run' | 'snapshot';
  outputs?: {}[] | null;
  running?: boolean;
  source?: string | null;
}
/**
 * [taskId, todos, by]: the task's todo list is now `todos` (the whole list);
 * `by` is "model" (update_todo_list) or "user" (UpdateTodoList).
 */
export interface TaskTodoListUpdated {
  eventName: 'taskTodoListUpdated';
  /**
   * @minItems 3
   * @maxItems 3
   */
  payload: [string, TodoItem[], string];
}
/**
 * An MCP server's state changed (connecting, connected, failed, restarting,
 * its tools changed): [status]. Daemon-wide.
 */
export interface McpServerChanged {
  eventName: 'mcpServerChanged';
  /**
   * @minItems 1
   * @maxItems 1
   */
  payload: [McpServerStatus];
}
/**
 * The discovery file, `hdspd.json` in the daemon's runtime dir: how a client
 * finds the daemon's sockets. Written (mode 0600) once the sockets are bound,
 * removed when the daemon exits.
 */
export interface Discovery {
  /**
   * ZeroMQ endpoint of the ROUTER socket (handshake, commands, replies): connect a DEALER (or a REQ) to it. `ipc://RUNTIME_DIR/control` today.
   */
  control: string;
  /**
   * ZeroMQ endpoint of the XPUB socket (events): connect a SUB (or an XSUB) to it. `ipc://RUNTIME_DIR/events` today.
   */
  events: string;
  /**
   * The daemon's process id; a file whose process is gone is stale (the daemon crashed).
   */
  pid: number;
  /**
   * The protocol version the daemon speaks.
   */
  protocolVersion: number;
  /**
   * The daemon's public CURVE key (z85) when it also listens on TCP (the `tcp.listen` setting); absent otherwise. `control` and `events` stay the local ipc:// endpoints.
   */
  serverPublicKey?: string | null;
  /**
   * The daemon's package version.
   */
  serverVersion: string;
  /**
   * When the daemon started, in milliseconds since the epoch.
   */
  startedAt: number;
}
export interface ErrorInfo {
  code: ErrorCode1;
  /**
   * Facts that go with the code (for `cursor_expired`: `oldestSeq`).
   */
  details?: {} | null;
  /**
   * What went wrong and what to do, for people.
   */
  message: string;
  /**
   * Where in the frame a decoding error was found, as `$.data.commandName`.
   */
  path?: string | null;
}
export interface GetCommandsData1 {
  /**
   * Include this workspace's `.hdsp/commands/`.
   */
  workspace?: string | null;
}
export interface GetModelsData1 {
  /**
   * Only this provider's models ("anthropic", "openai", ...).
   */
  provider?: string | null;
}
export interface GetModesData1 {
  /**
   * Include this workspace's `.hdsp/modes.yaml` (or .json) modes.
   */
  workspace?: string | null;
}
export interface GetSystemPromptData1 {
  /**
   * Without a task: in this mode.
   */
  mode?: string | null;
  /**
   * The prompt this task's next request sends.
   */
  taskId?: string | null;
  /**
   * Without a task: the prompt a new task here would get.
   */
  workspace?: string | null;
}
export interface Reply {
  /**
   * Why the command failed.
   */
  error?: ErrorInfo | null;
  /**
   * True: `result` is set; false: `error` is.
   */
  ok: boolean;
  origin?: 'server';
  /**
   * The command's `requestId`; None when the frame was too broken to have one.
   */
  requestId: string | null;
  /**
   * The command's result, of the type its row names (`$defs.CommandResults`); null for Shutdown.
   */
  result?: {
    [k: string]: unknown | undefined;
  };
  type: 'Reply';
}
export interface ListTasksData1 {
  /**
   * `nextCursor` of the previous page; absent for the newest tasks.
   */
  cursor?: string | null;
  /**
   * Only the tasks whose id starts with this (how a person's short id is resolved), newest first; one page, without `cursor`.
   */
  idPrefix?: string | null;
  /**
   * Most tasks in one page, 1 to 1000 (else invalid_request).
   */
  limit?: number;
}
/**
 * A provider profile as a client writes it (`SaveProfile`).
 */
export interface ProfileData1 {
  /**
   * The API's base URL; absent for the provider's own (OpenAI, Anthropic).
   */
  baseUrl?: string | null;
  model: string;
  name: string;
  /**
   * Provider options, e.g. `thinking_budget` (Anthropic), `reasoning_effort` (OpenAI), `max_tokens`, and the bounds on the server's silence in seconds: `first_byte_timeout` (before its response begins, default 30) and `idle_timeout` (between two events of a reply, default 120).
   */
  options?: {};
  /**
   * "anthropic", "openai", "openai-compatible" or "demo".
   */
  provider: string;
  /**
   * The NAME of the secret holding the API key (`SetSecret`), never a key.
   */
  secret?: string | null;
}
export interface SendMessageData1 {
  /**
   * hdsp: what the message is about (the active notebook, cell, selection, an outline), shown to the model as untrusted data and kept on the message.
   */
  context?: PromptContext | null;
  /**
   * To a task that is working: `queue` waits until its turn ends (then starts the next turn); `steer` joins the running turn, added to the conversation before its next model request (a `user_feedback` message shows where). A steered message the turn ends without is delivered as a queued one.
   */
  delivery?: 'queue' | 'steer';
  images?: string[] | null;
  /**
   * hdsp: MCP servers this client offers the task (an ACP host's; at most 16), beside the configured ones; they replace the ones offered before. Absent: the task keeps those it has.
   */
  mcpServers?: OfferedMcpServer[] | null;
  text?: string | null;
}
/**
 * The part of Roo's settings object that a new task reads. Other keys are
 * accepted and ignored.
 */
export interface TaskConfiguration1 {
  /**
   * hdsp: the agent the task runs (ListAgents; seed 002): its instructions and tools, and it may call other agents. None: a task of its mode, as before.
   */
  agent?: string | null;
  /**
   * hdsp: the daemon refuses `/`, its user's home directory itself and its own data and runtime dirs as a workspace (the agent reads a workspace freely) unless this is set, by a person who named one of them on purpose.
   */
  allowBroadWorkspace?: boolean;
  /**
   * Name of the provider profile to use (Roo's apiConfigName).
   */
  apiConfigName?: string | null;
  /**
   * Auto-approval settings for this task only (hdsp's ApprovalSettings fields, or Roo's names such as alwaysAllowWrite), over the daemon's settings.
   */
  approvals?: {} | null;
  /**
   * Roo's customInstructions: instructions for this task, in its system prompt after the global ones (GetSystemPrompt shows where).
   */
  customInstructions?: string | null;
  /**
   * A kernel (ListKernels) the task's code runs in; by default the task starts its own on first use, in its workspace.
   */
  kernelId?: string | null;
  /**
   * hdsp: where the task's kernels run: local (this machine, in hdspd's sandbox) or gateway (the Jupyter server of the profile's or the settings' kernels.gateway). None: as the profile's or the settings' kernels.provider says.
   */
  kernelProvider?: ('gateway' | 'local') | null;
  /**
   * The task's mode (GetModes lists them); `code` when absent.
   */
  mode?: string | null;
  /**
   * Directory the agent works in (absolute). Clients send their own working directory when the user names none; without one the daemon uses its own working directory, unless that is a directory it refuses (see below).
   */
  workspace?: string | null;
}
