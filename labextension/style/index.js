import './base.css';
import '@xterm/xterm/css/xterm.css';
import './arrays.css';
