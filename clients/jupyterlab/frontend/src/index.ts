/**
 * hdsp's JupyterLab panel: a left-sidebar widget (id `hdsp-panel`) opened by the
 * command `hdsp:open-panel` ("hdsp: Open panel" in the palette). It talks to
 * the hdsp server extension only (CONTRACT.md), never to hdspd directly.
 */
import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette, ReactWidget } from '@jupyterlab/apputils';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { LabIcon } from '@jupyterlab/ui-components';
import React from 'react';

import { agentCellMarksPlugin } from './agentCellMarks';
import { NotebookContextSource } from './contextChips';
import { startLiveEdits } from './liveEditsLab';
import { PanelModel } from './model';
import { Panel } from './panel';

export const PANEL_ID = 'hdsp-panel';
export const OPEN_COMMAND = 'hdsp:open-panel';

const hdspIcon = new LabIcon({
  name: 'hdsp:icon',
  svgstr:
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" width="16"><g class="jp-icon3" fill="#616161">' +
    '<path d="M4 3h2v7h6V3h2v18h-2v-9H6v9H4z"/><circle cx="19" cy="6" r="2"/><circle cx="19" cy="12" r="2"/><circle cx="19" cy="18" r="2"/></g></svg>'
});

const plugin: JupyterFrontEndPlugin<void> = {
  id: '@hdsp/jupyterlab:plugin',
  description: 'A panel to run, watch, steer and approve hdsp tasks.',
  autoStart: true,
  requires: [IRenderMimeRegistry],
  optional: [ICommandPalette, ILayoutRestorer],
  activate: (
    app: JupyterFrontEnd,
    rendermime: IRenderMimeRegistry,
    palette: ICommandPalette | null,
    restorer: ILayoutRestorer | null
  ) => {
    const model = new PanelModel();
    // The prompt's context chips read the main area's current notebook.
    const notebooks = new NotebookContextSource(app.shell);
    // The agent's edits to the notebooks open here, without real-time collaboration.
    const liveEdits = startLiveEdits(app.shell, model);
    const widget = ReactWidget.create(React.createElement(Panel, { model, rendermime, notebooks }));
    widget.id = PANEL_ID;
    widget.title.icon = hdspIcon;
    widget.title.caption = 'hdsp';
    widget.addClass('hdsp-panel-widget');
    widget.disposed.connect(() => {
      liveEdits.dispose();
      model.dispose();
      notebooks.dispose();
    });
    app.shell.add(widget, 'left', { rank: 600 });
    restorer?.add(widget, PANEL_ID);

    app.commands.addCommand(OPEN_COMMAND, {
      label: 'hdsp: Open panel',
      caption: 'Open the hdsp panel: tasks, conversation, approvals',
      icon: hdspIcon,
      execute: () => app.shell.activateById(PANEL_ID)
    });
    palette?.addItem({ command: OPEN_COMMAND, category: 'hdsp' });

    void model.start();
  }
};

export default [plugin, agentCellMarksPlugin];
