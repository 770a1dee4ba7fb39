import './base.css';
import '@xterm/xterm/css/xterm.css';
