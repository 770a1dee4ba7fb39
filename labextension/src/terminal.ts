/**
 * A terminal in a running task, as a JupyterLab main-area tab: xterm.js (bundled with the
 * extension) on the exec WebSocket (exec.ts), the task owner's login shell inside the task with
 * a tty of the tab's size; the tab's size follows the tab (a resize frame), Lab's theme colours
 * it. Closing the tab hangs the shell up; "Reconnect" opens a new shell once one has ended.
 */

import { MainAreaWidget, Toolbar, ToolbarButton } from '@jupyterlab/apputils';
import { refreshIcon } from '@jupyterlab/ui-components';
import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';
import { FitAddon } from '@xterm/addon-fit';
import { ITheme, Terminal } from '@xterm/xterm';

import { ExecSession, SocketLike } from './exec';

export interface TerminalOptions {
  taskId: number;
  taskName: string;
  /** Opens the exec WebSocket of the task (through the user's Jupyter server). */
  connect: () => SocketLike;
}

function cssVar(name: string, fallback: string): string {
  const value = getComputedStyle(document.body).getPropertyValue(name).trim();
  return value || fallback;
}

/** xterm colours from Lab's theme variables (light and dark). */
function labTheme(): ITheme {
  const dark = document.body.dataset.jpThemeLight === 'false';
  return {
    background: cssVar('--jp-layout-color0', dark ? '#111111' : '#ffffff'),
    foreground: cssVar('--jp-ui-font-color0', dark ? '#ffffff' : '#000000'),
    cursor: cssVar('--jp-ui-font-color1', dark ? '#dddddd' : '#333333'),
    cursorAccent: cssVar('--jp-layout-color0', dark ? '#111111' : '#ffffff'),
    selectionBackground: dark ? 'rgba(255, 255, 255, 0.3)' : 'rgba(0, 0, 0, 0.2)'
  };
}

export type TerminalStatus = 'connecting' | 'connected' | 'exited' | 'closed' | 'error';

export class TaskTerminalView extends Widget {
  readonly term: Terminal;
  private readonly fitter = new FitAddon();
  private session: ExecSession | null = null;
  private opened = false;
  status: TerminalStatus = 'connecting';
  onStatus: ((s: TerminalStatus) => void) | null = null;

  constructor(private readonly opts: TerminalOptions) {
    super();
    this.addClass('tacc-terminal');
    this.node.dataset.taskId = String(opts.taskId);
    this.term = new Terminal({
      cursorBlink: true,
      fontFamily: cssVar('--jp-code-font-family', 'monospace'),
      fontSize: 13,
      scrollback: 5000,
      theme: labTheme()
    });
    this.term.loadAddon(this.fitter);
    this.term.onData(data => this.session?.input(data));
    this.term.onBinary(data => this.session?.input(Uint8Array.from(data, c => c.charCodeAt(0) & 0xff)));
    this.term.onResize(({ rows, cols }) => this.session?.resize(rows, cols));
  }

  private setStatus(s: TerminalStatus): void {
    this.status = s;
    this.node.dataset.status = s;
    this.onStatus?.(s);
  }

  /** Open a new shell in the task (the first, or after the last one ended). */
  connect(): void {
    this.session?.close();
    this.setStatus('connecting');
    const socket = this.opts.connect();
    const session = new ExecSession(
      socket,
      () => ({ rows: this.term.rows, cols: this.term.cols }),
      {
        onData: data => this.term.write(data),
        onOpen: () => {
          this.setStatus('connected');
          this.term.focus();
        },
        onExit: code => {
          this.term.write(`\r\n\x1b[2m[process exited with status ${code}]\x1b[0m\r\n`);
          this.setStatus('exited');
        },
        onError: message => {
          this.term.write(`\r\n\x1b[31m[${message}]\x1b[0m\r\n`);
          this.setStatus('error');
        },
        onClose: () => {
          if (this.session === session && session.state !== 'exited' && this.status !== 'error') {
            this.term.write('\r\n\x1b[2m[connection closed]\x1b[0m\r\n');
            this.setStatus('closed');
          }
        }
      }
    );
    this.session = session;
  }

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    if (!this.opened) {
      this.opened = true;
      this.term.open(this.node);
      this.fitNow();
      this.connect();
    }
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    this.term.options.theme = labTheme();
    this.fitNow();
  }

  protected onResize(msg: Widget.ResizeMessage): void {
    super.onResize(msg);
    this.fitNow();
  }

  protected onActivateRequest(msg: Message): void {
    super.onActivateRequest(msg);
    this.term.focus();
  }

  private fitNow(): void {
    if (this.opened && this.isVisible && this.node.clientWidth > 0 && this.node.clientHeight > 0) {
      try {
        this.fitter.fit();
      } catch {
        // not laid out yet
      }
    }
  }

  /** Lab's theme changed. */
  updateTheme(): void {
    this.term.options.theme = labTheme();
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this.session?.close();
    this.session = null;
    this.term.dispose();
    super.dispose();
  }
}

const STATUS_TEXT: Record<TerminalStatus, string> = {
  connecting: 'connecting…',
  connected: 'connected',
  exited: 'shell exited',
  closed: 'disconnected',
  error: 'error'
};

/** The main-area tab: a toolbar (the task, the connection's state, Reconnect) over the terminal. */
export function taskTerminal(opts: TerminalOptions): MainAreaWidget<TaskTerminalView> {
  const view = new TaskTerminalView(opts);
  const widget = new MainAreaWidget({ content: view });
  widget.id = `tacc-terminal-${opts.taskId}-${Date.now()}`;
  widget.addClass('tacc-terminal-tab');
  widget.title.label = `Task ${opts.taskId}: ${opts.taskName}`;
  widget.title.caption = `A shell inside task ${opts.taskId} (${opts.taskName})`;
  widget.title.closable = true;

  const where = new Widget();
  where.addClass('tacc-terminal-where');
  where.node.textContent = `Shell in task #${opts.taskId} (${opts.taskName})`;
  const state = new Widget();
  state.addClass('tacc-terminal-state');
  const reconnect = new ToolbarButton({
    icon: refreshIcon,
    label: 'Reconnect',
    tooltip: 'Open a new shell in the task',
    enabled: false,
    onClick: () => view.connect()
  });
  widget.toolbar.addItem('where', where);
  widget.toolbar.addItem('state', state);
  widget.toolbar.addItem('spacer', Toolbar.createSpacerItem());
  widget.toolbar.addItem('reconnect', reconnect);
  view.onStatus = s => {
    state.node.textContent = STATUS_TEXT[s];
    state.node.dataset.status = s;
    reconnect.enabled = s !== 'connecting' && s !== 'connected';
  };
  view.onStatus(view.status);
  return widget;
}
