/**
 * tacc-hub-labextension: the tacc_hub side panel in JupyterLab 4.
 *
 * Commands: `tacc:open-panel`, `tacc:submit-notebook` (palette and a notebook toolbar
 * button), `tacc:refresh`, `tacc:open-terminal` (args `{id}`: a shell in a running task, in a
 * main-area tab). Everything goes through the user's own Jupyter server (tacc_hub's server
 * extension at `<base_url>/tacc/api/...`, HTTP and the exec WebSocket), but a task's web ports,
 * which the browser opens straight through the hub. A running task's end is announced 10
 * minutes ahead (a Lab notification with Extend), once per run of the task.
 */

import { ILabShell, ILayoutRestorer, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette, IThemeManager, Notification, ToolbarButton } from '@jupyterlab/apputils';
import { URLExt } from '@jupyterlab/coreutils';
import { DocumentRegistry } from '@jupyterlab/docregistry';
import { INotebookModel, INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { ServerConnection } from '@jupyterlab/services';
import { LabIcon } from '@jupyterlab/ui-components';
import { DisposableDelegate, IDisposable } from '@lumino/disposable';

import { ROUTES, RequestFn, TaccApi } from './api';
import { SocketLike } from './exec';
import { arrayKey, describeGroupChange, pipelineKey } from './arrays';
import { Task, describeChange, worthNotifying } from './model';
import { TaccPanel } from './panel';
import { dueWarnings, warningMessage } from './running';
import { extendTask } from './runview';
import { TaskTerminalView, taskTerminal } from './terminal';
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
  export const terminal = 'tacc:open-terminal';
}

function makeApi(): TaccApi {
  const settings = ServerConnection.makeSettings();
  const request: RequestFn = (path, init) => ServerConnection.makeRequest(settings.baseUrl + path, init ?? {}, settings);
  return new TaccApi(request);
}

/** The exec WebSocket of a task through the user's Jupyter server (its cookie, or its token as Lab's own sockets). */
function execSocket(id: number): SocketLike {
  const settings = ServerConnection.makeSettings();
  let url = URLExt.join(settings.wsUrl, ROUTES.exec(id));
  if (settings.token) {
    url += `?token=${encodeURIComponent(settings.token)}`;
  }
  return new settings.WebSocket(url) as unknown as SocketLike;
}

const WARNED_KEY = 'tacc-hub:warned-runs';

/** Runs already warned about (kept in the browser: a reload does not warn again). */
function loadWarned(): Set<string> {
  try {
    const raw = JSON.parse(window.localStorage.getItem(WARNED_KEY) ?? '[]');
    return new Set(Array.isArray(raw) ? raw.map(String) : []);
  } catch {
    return new Set();
  }
}

function saveWarned(warned: Set<string>): void {
  try {
    window.localStorage.setItem(WARNED_KEY, JSON.stringify([...warned].slice(-200)));
  } catch {
    // storage full or off: warnings may repeat after a reload
  }
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'tacc-hub-labextension:plugin',
  description: 'GPU cluster tasks of tacc_hub: list, logs, cancel, resubmit, and submit this notebook.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ICommandPalette, ILayoutRestorer, ILabShell, IThemeManager],
  activate: (
    app: JupyterFrontEnd,
    notebooks: INotebookTracker,
    palette: ICommandPalette | null,
    restorer: ILayoutRestorer | null,
    labShell: ILabShell | null,
    themes: IThemeManager | null
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

    const terminals = new Set<TaskTerminalView>();
    const openTerminal = (task: Task): void => {
      const widget = taskTerminal({ taskId: task.id, taskName: task.name, connect: () => execSocket(task.id) });
      terminals.add(widget.content);
      widget.disposed.connect(() => terminals.delete(widget.content));
      app.shell.add(widget, 'main');
      app.shell.activateById(widget.id);
    };
    if (themes) {
      themes.themeChanged.connect(() => {
        // the theme's CSS is applied after the signal: read its colours on the next frame
        requestAnimationFrame(() => terminals.forEach(t => t.updateTheme()));
      });
    }

    const panel = new TaccPanel(model, {
      submitCurrent: () => void app.commands.execute(CommandIDs.submit),
      canSubmit: () => notebooks.currentWidget !== null,
      openTerminal
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

    // an array or a pipeline that ended: one notification for it (its elements say nothing one by one)
    model.groupChanged.connect((_, changes) => {
      for (const change of changes) {
        const { level, message } = describeGroupChange(change);
        Notification.emit(message, level, {
          autoClose: level === 'error' ? false : 6000,
          actions: [
            {
              label: 'Show',
              caption: `Open ${change.kind} ${change.id} in the GPU tasks panel`,
              callback: () => {
                app.shell.activateById(panel.id);
                panel.openGroup(change.kind === 'array' ? arrayKey(change.id) : pipelineKey(change.id));
              }
            }
          ]
        });
      }
    });

    // 10 minutes before a running task's end: a notification (once per run of the task)
    const warned = loadWarned();
    const checkDeadlines = (): void => {
      // not for array elements: a sweep of 100 would warn 100 times (an element opened in its array's row shows its time left)
      const due = dueWarnings(model.tasks.filter(t => t.array_id == null), api.now(), warned);
      if (!due.length) {
        return;
      }
      saveWarned(warned);
      for (const task of due) {
        Notification.warning(warningMessage(task, api.now()), {
          autoClose: false,
          actions: [
            {
              label: 'Extend',
              caption: `Give task ${task.id} more time`,
              callback: () => void extendTask(model, model.byId?.get(task.id) ?? task)
            },
            {
              label: 'Show task',
              caption: `Open task ${task.id} in the GPU tasks panel`,
              callback: () => {
                app.shell.activateById(panel.id);
                panel.select(task.id, 'log');
              }
            }
          ]
        });
      }
    };
    model.changed.connect(checkDeadlines);
    window.setInterval(checkDeadlines, 5000);

    app.commands.addCommand(CommandIDs.terminal, {
      label: 'GPU Tasks: Open a Terminal in a Task',
      caption: 'A shell inside a running task (args: id)',
      execute: args => {
        const id = Number(args['id']);
        const task = model.byId?.get(id);
        if (task && task.status === 'running') {
          openTerminal(task);
        }
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
