/**
 * tacc-hub-labextension: the tacc_hub side panel in JupyterLab 4.
 *
 * Commands: `tacc:open-panel`, `tacc:submit-notebook` (palette and a notebook toolbar
 * button), `tacc:refresh`. Everything goes through the user's own Jupyter server
 * (tacc_hub's server extension at `<base_url>/tacc/api/...`).
 */

import { ILabShell, ILayoutRestorer, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette, Notification, ToolbarButton } from '@jupyterlab/apputils';
import { DocumentRegistry } from '@jupyterlab/docregistry';
import { INotebookModel, INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { ServerConnection } from '@jupyterlab/services';
import { LabIcon } from '@jupyterlab/ui-components';
import { DisposableDelegate, IDisposable } from '@lumino/disposable';

import { RequestFn, TaccApi } from './api';
import { describeChange, worthNotifying } from './model';
import { TaccPanel } from './panel';
import { submitNotebookDialog } from './submit';
import { TasksModel } from './tasks';

const ICON_SVG = `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">
<g class="jp-icon3" fill="#616161"><path d="M7 7h10v10H7z" opacity=".35"/><path d="M5 5h14v14H5zm2 2v10h10V7z"/>
<path d="M9 1h2v3H9zm4 0h2v3h-2zM9 20h2v3H9zm4 0h2v3h-2zM1 9h3v2H1zm0 4h3v2H1zm19-4h3v2h-3zm0 4h3v2h-3z"/></g></svg>`;

export const taccIcon = new LabIcon({ name: 'tacc-hub:gpu', svgstr: ICON_SVG });

export namespace CommandIDs {
  export const open = 'tacc:open-panel';
  export const submit = 'tacc:submit-notebook';
  export const refresh = 'tacc:refresh';
}

function makeApi(): TaccApi {
  const settings = ServerConnection.makeSettings();
  const request: RequestFn = (path, init) => ServerConnection.makeRequest(settings.baseUrl + path, init ?? {}, settings);
  return new TaccApi(request);
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'tacc-hub-labextension:plugin',
  description: 'GPU cluster tasks of tacc_hub: list, logs, cancel, resubmit, and submit this notebook.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ICommandPalette, ILayoutRestorer, ILabShell],
  activate: (
    app: JupyterFrontEnd,
    notebooks: INotebookTracker,
    palette: ICommandPalette | null,
    restorer: ILayoutRestorer | null,
    labShell: ILabShell | null
  ) => {
    const api = makeApi();
    const model = new TasksModel(api);

    const submitCurrent = async (panelWidget?: NotebookPanel | null): Promise<void> => {
      const nb = panelWidget ?? notebooks.currentWidget;
      if (!nb) {
        return;
      }
      await nb.context.ready;
      if (nb.context.model.dirty) {
        await nb.context.save();
      }
      const kernelId = nb.sessionContext.session?.kernel?.id;
      const task = await submitNotebookDialog(api, nb.context.path, kernelId);
      if (task) {
        model.noteSubmitted(task);
        Notification.success(`Task ${task.id} (${task.name}) submitted`, { autoClose: 4000 });
        app.shell.activateById(panel.id);
        panel.select(task.id, 'log');
      }
    };

    const panel = new TaccPanel(model, {
      submitCurrent: () => void app.commands.execute(CommandIDs.submit),
      canSubmit: () => notebooks.currentWidget !== null
    });
    panel.title.icon = taccIcon;
    app.shell.add(panel, 'right', { rank: 600 });
    if (restorer) {
      restorer.add(panel, 'tacc-hub-panel');
    }
    notebooks.currentChanged.connect(() => panel.update());

    model.stateChanged.connect((_, changes) => {
      for (const change of changes.filter(worthNotifying)) {
        const { level, message } = describeChange(change);
        // a task that can never start stays a while: it waits for the user to act (cancel it, or ask for more)
        Notification.emit(message, level, {
          autoClose: level === 'error' ? false : change.overQuota ? 20000 : 6000,
          actions: [
            {
              label: change.overQuota ? 'Show task' : 'Show log',
              caption: `Open task ${change.task.id} in the GPU tasks panel`,
              callback: () => {
                app.shell.activateById(panel.id);
                panel.select(change.task.id, 'log');
              }
            }
          ]
        });
      }
    });

    app.commands.addCommand(CommandIDs.open, {
      label: 'GPU Tasks: Show Panel',
      caption: 'Show your tacc_hub tasks',
      icon: taccIcon,
      execute: () => app.shell.activateById(panel.id)
    });
    app.commands.addCommand(CommandIDs.submit, {
      label: 'GPU Tasks: Submit This Notebook',
      caption: 'Capture this notebook and its environment as a task and submit it',
      icon: args => (args['toolbar'] ? taccIcon : undefined),
      isEnabled: () => notebooks.currentWidget !== null,
      execute: () => submitCurrent()
    });
    app.commands.addCommand(CommandIDs.refresh, {
      label: 'GPU Tasks: Refresh',
      execute: () => model.kick()
    });
    if (palette) {
      for (const command of [CommandIDs.open, CommandIDs.submit, CommandIDs.refresh]) {
        palette.addItem({ command, category: 'GPU Cluster' });
      }
    }

    app.docRegistry.addWidgetExtension('Notebook', {
      createNew(nb: NotebookPanel, _context: DocumentRegistry.IContext<INotebookModel>): IDisposable {
        const button = new ToolbarButton({
          className: 'tacc-submit-button',
          icon: taccIcon,
          label: 'Submit',
          tooltip: 'Submit this notebook to the GPU cluster',
          onClick: () => void submitCurrent(nb)
        });
        button.node.setAttribute('aria-label', 'Submit this notebook to the GPU cluster');
        nb.toolbar.insertItem(10, 'taccSubmit', button);
        return new DisposableDelegate(() => button.dispose());
      }
    });

    if (labShell) {
      labShell.currentChanged.connect(() => panel.update());
    }
  }
};

export default plugin;
