"use strict";(self.rspackChunktacc_hub_labextension=self.rspackChunktacc_hub_labextension||[]).push([[96],{739(e,r,t){var o=t(601),a=t.n(o),n=t(314),c=(t.n(n))()(a());c.push([e.id,`/**
 * Copyright (c) 2014 The xterm.js authors. All rights reserved.
 * Copyright (c) 2012-2013, Christopher Jeffrey (MIT License)
 * https://github.com/chjj/term.js
 * @license MIT
 *
 * Permission is hereby granted, free of charge, to any person obtaining a copy
 * of this software and associated documentation files (the "Software"), to deal
 * in the Software without restriction, including without limitation the rights
 * to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
 * copies of the Software, and to permit persons to whom the Software is
 * furnished to do so, subject to the following conditions:
 *
 * The above copyright notice and this permission notice shall be included in
 * all copies or substantial portions of the Software.
 *
 * THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
 * IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
 * FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
 * AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
 * LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
 * OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN
 * THE SOFTWARE.
 *
 * Originally forked from (with the author's permission):
 *   Fabrice Bellard's javascript vt100 for jslinux:
 *   http://bellard.org/jslinux/
 *   Copyright (c) 2011 Fabrice Bellard
 *   The original design remains. The terminal itself
 *   has been extended to include xterm CSI codes, among
 *   other features.
 */

/**
 *  Default styles for xterm.js
 */

.xterm {
    cursor: text;
    position: relative;
    user-select: none;
    -ms-user-select: none;
    -webkit-user-select: none;
}

.xterm.focus,
.xterm:focus {
    outline: none;
}

.xterm .xterm-helpers {
    position: absolute;
    top: 0;
    /**
     * The z-index of the helpers must be higher than the canvases in order for
     * IMEs to appear on top.
     */
    z-index: 5;
}

.xterm .xterm-helper-textarea {
    padding: 0;
    border: 0;
    margin: 0;
    /* Move textarea out of the screen to the far left, so that the cursor is not visible */
    position: absolute;
    opacity: 0;
    left: -9999em;
    top: 0;
    width: 0;
    height: 0;
    z-index: -5;
    /** Prevent wrapping so the IME appears against the textarea at the correct position */
    white-space: nowrap;
    overflow: hidden;
    resize: none;
}

.xterm .composition-view {
    /* TODO: Composition position got messed up somewhere */
    background: #000;
    color: #FFF;
    display: none;
    position: absolute;
    white-space: nowrap;
    z-index: 1;
}

.xterm .composition-view.active {
    display: block;
}

.xterm .xterm-viewport {
    /* On OS X this is required in order for the scroll bar to appear fully opaque */
    background-color: #000;
    overflow-y: scroll;
    cursor: default;
    position: absolute;
    right: 0;
    left: 0;
    top: 0;
    bottom: 0;
}

.xterm .xterm-screen {
    position: relative;
}

.xterm .xterm-screen canvas {
    position: absolute;
    left: 0;
    top: 0;
}

.xterm .xterm-scroll-area {
    visibility: hidden;
}

.xterm-char-measure-element {
    display: inline-block;
    visibility: hidden;
    position: absolute;
    top: 0;
    left: -9999em;
    line-height: normal;
}

.xterm.enable-mouse-events {
    /* When mouse events are enabled (eg. tmux), revert to the standard pointer cursor */
    cursor: default;
}

.xterm.xterm-cursor-pointer,
.xterm .xterm-cursor-pointer {
    cursor: pointer;
}

.xterm.column-select.focus {
    /* Column selection mode */
    cursor: crosshair;
}

.xterm .xterm-accessibility:not(.debug),
.xterm .xterm-message {
    position: absolute;
    left: 0;
    top: 0;
    bottom: 0;
    right: 0;
    z-index: 10;
    color: transparent;
    pointer-events: none;
}

.xterm .xterm-accessibility-tree:not(.debug) *::selection {
  color: transparent;
}

.xterm .xterm-accessibility-tree {
  user-select: text;
  white-space: pre;
}

.xterm .live-region {
    position: absolute;
    left: -9999px;
    width: 1px;
    height: 1px;
    overflow: hidden;
}

.xterm-dim {
    /* Dim should not apply to background, so the opacity of the foreground color is applied
     * explicitly in the generated class and reset to 1 here */
    opacity: 1 !important;
}

.xterm-underline-1 { text-decoration: underline; }
.xterm-underline-2 { text-decoration: double underline; }
.xterm-underline-3 { text-decoration: wavy underline; }
.xterm-underline-4 { text-decoration: dotted underline; }
.xterm-underline-5 { text-decoration: dashed underline; }

.xterm-overline {
    text-decoration: overline;
}

.xterm-overline.xterm-underline-1 { text-decoration: overline underline; }
.xterm-overline.xterm-underline-2 { text-decoration: overline double underline; }
.xterm-overline.xterm-underline-3 { text-decoration: overline wavy underline; }
.xterm-overline.xterm-underline-4 { text-decoration: overline dotted underline; }
.xterm-overline.xterm-underline-5 { text-decoration: overline dashed underline; }

.xterm-strikethrough {
    text-decoration: line-through;
}

.xterm-screen .xterm-decoration-container .xterm-decoration {
	z-index: 6;
	position: absolute;
}

.xterm-screen .xterm-decoration-container .xterm-decoration.xterm-decoration-top-layer {
	z-index: 7;
}

.xterm-decoration-overview-ruler {
    z-index: 8;
    position: absolute;
    top: 0;
    right: 0;
    pointer-events: none;
}

.xterm-decoration-top {
    z-index: 2;
    position: relative;
}
`,""]),t.d(r,{},{A:c})},914(e,r,t){var o=t(601),a=t.n(o),n=t(314),c=(t.n(n))()(a());c.push([e.id,`/* Arrays and pipelines in the task list (arrayview.tsx): one row each, a progress bar, a drill-down. */

.tacc-caret { display: inline-block; width: 1em; color: var(--jp-ui-font-color2); }
.tacc-size { color: var(--jp-ui-font-color2); margin-left: 1px; }
.tacc-group.tacc-nested { margin: 2px 0; }

.tacc-group-progress { padding: 0 6px 3px; }
.tacc-progress {
  display: flex;
  width: 100%;
  height: 6px;
  border-radius: 3px;
  overflow: hidden;
  background: var(--jp-layout-color3);
}
.tacc-progress-part { display: block; height: 100%; min-width: 2px; }
.tacc-progress-done { background: var(--jp-success-color1); }
.tacc-progress-failed { background: var(--jp-error-color1); }
.tacc-progress-cancelled { background: var(--jp-ui-font-color3); }
.tacc-progress-running { background: var(--jp-brand-color1); }
.tacc-progress-waiting { background: var(--jp-warn-color2); }

.tacc-counts .tacc-count { white-space: nowrap; }
.tacc-count::before {
  content: '';
  display: inline-block;
  width: 7px;
  height: 7px;
  border-radius: 50%;
  margin-right: 4px;
  vertical-align: 0;
}
.tacc-count-done::before { background: var(--jp-success-color1); }
.tacc-count-running::before { background: var(--jp-brand-color1); }
.tacc-count-waiting::before { background: var(--jp-warn-color2); }
.tacc-count-failed::before { background: var(--jp-error-color1); }
.tacc-count-cancelled::before { background: var(--jp-ui-font-color3); }
.tacc-counts[data-failed='0'] .tacc-count-failed { opacity: 0.6; }

.tacc-group-reason { padding: 0 6px 4px; margin: 0; font-size: var(--jp-ui-font-size0); }
.tacc-group-note { font-size: var(--jp-ui-font-size0); align-self: center; }

.tacc-elements { list-style: none; margin: 4px 0 0; padding: 0; }
.tacc-elements > .tacc-task { margin: 3px 0; }
.tacc-element { border-bottom: var(--jp-border-width) solid var(--jp-border-color3); }
.tacc-element:last-child { border-bottom: none; }
.tacc-element-head {
  display: flex;
  align-items: center;
  gap: 8px;
  width: 100%;
  border: none;
  background: transparent;
  color: var(--jp-ui-font-color1);
  font: inherit;
  text-align: left;
  padding: 2px 4px;
  cursor: pointer;
}
.tacc-element-head:hover { background: var(--jp-layout-color2); }
.tacc-element-head:focus-visible { outline: var(--jp-border-width) solid var(--jp-brand-color1); outline-offset: -1px; }
.tacc-element-index {
  font-family: var(--jp-code-font-family);
  color: var(--jp-ui-font-color2);
  min-width: 2.4em;
  font-variant-numeric: tabular-nums;
}
.tacc-element-params {
  flex: 1 1 auto;
  min-width: 0;
  font-family: var(--jp-code-font-family);
  font-size: var(--jp-ui-font-size0);
  overflow-wrap: anywhere; /* a sweep's point is its parameters: all of them shown, wrapped on a narrow panel */
}
.tacc-element-head .tacc-status { flex: 0 0 auto; }
.tacc-element-mark {
  color: var(--jp-ui-font-color1);
  border: var(--jp-border-width) solid var(--jp-border-color1);
  border-radius: var(--jp-border-radius);
  padding: 0 4px;
}
.tacc-more { margin-top: 4px; }

.tacc-chain { display: inline-flex; flex-wrap: wrap; align-items: center; gap: 2px 4px; }
.tacc-chain-arrow { color: var(--jp-ui-font-color3); }
.tacc-chain-step { white-space: nowrap; }
.tacc-step-succeeded { color: var(--jp-success-color1); }
.tacc-step-failed, .tacc-step-lost { color: var(--jp-error-color1); }
.tacc-step-running, .tacc-step-starting { color: var(--jp-brand-color1); }
.tacc-step-pending { color: var(--jp-ui-font-color2); }
.tacc-step-cancelled { color: var(--jp-ui-font-color3); text-decoration: line-through; }

.tacc-steps { margin: 4px 0 0; padding: 0; list-style: none; }
.tacc-step {
  padding: 2px 0;
  border-bottom: var(--jp-border-width) solid var(--jp-border-color3);
  display: flex;
  flex-direction: column;
  gap: 2px;
}
.tacc-step:last-child { border-bottom: none; }
.tacc-step-head {
  display: flex;
  align-items: center;
  gap: 6px;
  width: 100%;
  border: none;
  background: transparent;
  color: var(--jp-ui-font-color1);
  font: inherit;
  text-align: left;
  padding: 2px 4px;
  cursor: pointer;
}
.tacc-step-head:hover:enabled { background: var(--jp-layout-color2); }
.tacc-step-head:disabled { cursor: default; }
.tacc-step-head:focus-visible { outline: var(--jp-border-width) solid var(--jp-brand-color1); outline-offset: -1px; }
.tacc-step-head .tacc-spacer { flex: 1 1 auto; }
.tacc-step-n { color: var(--jp-ui-font-color2); min-width: 1.4em; font-variant-numeric: tabular-nums; }
.tacc-step-name { font-weight: 600; overflow-wrap: anywhere; }
.tacc-step-needs, .tacc-step-waits {
  font-size: var(--jp-ui-font-size0);
  padding-left: calc(1.4em + 10px);
  overflow-wrap: anywhere;
}
.tacc-step-needs { color: var(--jp-ui-font-color2); }
.tacc-step-waits { color: var(--jp-warn-color0); }
.tacc-step-task { margin-left: calc(1.4em + 6px); }
`,""]),t.d(r,{},{A:c})},475(e,r,t){var o=t(601),a=t.n(o),n=t(314),c=(t.n(n))()(a());c.push([e.id,`/* tacc_hub side panel: JupyterLab theme variables only (light and dark themes). */

.tacc-panel {
  background: var(--jp-layout-color1);
  color: var(--jp-ui-font-color1);
  font-family: var(--jp-ui-font-family);
  font-size: var(--jp-ui-font-size1);
  overflow-y: auto;
  overflow-x: hidden;
  min-width: 240px;
  container-type: inline-size; /* the layout below follows the panel's width, not the window's */
}

.tacc-panel-inner { padding: 8px; }

.tacc-header {
  display: flex;
  flex-wrap: wrap; /* on a narrow panel the buttons go, all together, under the title */
  align-items: center;
  justify-content: space-between;
  gap: 4px;
  border-bottom: var(--jp-border-width) solid var(--jp-border-color2);
  padding-bottom: 6px;
  margin-bottom: 6px;
}

.tacc-title {
  font-size: var(--jp-ui-font-size2);
  font-weight: 600;
  margin: 0;
  flex: 1 0 auto;
  white-space: nowrap;
}
.tacc-header-actions { margin-left: auto; }

/* buttons never wrap: labels shorten on a narrow panel (below) */
.tacc-header-actions, .tacc-actions { display: flex; flex-wrap: nowrap; gap: 4px; flex: 0 0 auto; }
.tacc-actions .tacc-spacer { flex: 1 1 auto; }

.tacc-btn {
  min-width: 0;
  padding: 0 8px;
  height: 24px;
  line-height: 22px;
  white-space: nowrap;
  display: inline-flex;
  align-items: center;
  gap: 4px;
}
.tacc-icon { display: inline-flex; }
.tacc-icon svg { width: 14px; height: 14px; }
.tacc-icon .jp-icon3[fill] { fill: currentColor; }
.tacc-refresh { padding: 0 5px; }

@container (max-width: 250px) {
  .tacc-wide { display: none; }
}

@container (max-width: 300px) {
  .tacc-actions .tacc-btn, .tacc-run-actions .tacc-btn { padding: 0 5px; }
}
/* secondary buttons outlined, not filled: a row of grey blocks reads as one bar */
.tacc-panel .jp-Button.tacc-btn.jp-mod-reject {
  background: var(--jp-layout-color1);
  color: var(--jp-ui-font-color1);
  border: var(--jp-border-width) solid var(--jp-border-color1);
}
.tacc-panel .jp-Button.tacc-btn.jp-mod-reject:hover:enabled { background: var(--jp-layout-color2); }
.tacc-panel .jp-Button.tacc-btn.jp-mod-reject[aria-pressed='true'] {
  background: var(--jp-layout-color3);
  border-color: var(--jp-brand-color1);
}
.tacc-panel .jp-Button.tacc-btn.jp-mod-warn {
  background: var(--jp-layout-color1);
  color: var(--jp-error-color1);
  border: var(--jp-border-width) solid var(--jp-error-color1);
}
.tacc-panel .jp-Button.tacc-btn.jp-mod-warn:hover:enabled { background: var(--jp-error-color3); }

.tacc-btn:focus-visible, .tacc-task-head:focus-visible, .tacc-log-text:focus-visible, .tacc-spec-text:focus-visible {
  outline: var(--jp-border-width) solid var(--jp-brand-color1);
  outline-offset: 1px;
}

.tacc-error {
  color: var(--jp-error-color1);
  background: var(--jp-error-color3);
  border: var(--jp-border-width) solid var(--jp-error-color2);
  padding: 4px 6px;
  margin: 4px 0;
  white-space: pre-wrap;
}

.tacc-muted { color: var(--jp-ui-font-color2); padding: 2px 0; }

.tacc-tasks, .tacc-nodes, .tacc-notes { list-style: none; margin: 0; padding: 0; }

.tacc-task {
  border: var(--jp-border-width) solid var(--jp-border-color2);
  border-radius: var(--jp-border-radius);
  margin: 4px 0;
  background: var(--jp-layout-color1);
}

.tacc-task.tacc-open { border-color: var(--jp-brand-color2); }

.tacc-task-head {
  display: flex;
  width: 100%;
  justify-content: space-between;
  align-items: center;
  gap: 6px;
  border: none;
  background: transparent;
  color: var(--jp-ui-font-color1);
  font: inherit;
  text-align: left;
  padding: 4px 6px;
  cursor: pointer;
}

.tacc-task-head:hover { background: var(--jp-layout-color2); }
.tacc-task-title { overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.tacc-task-id { color: var(--jp-ui-font-color2); }

.tacc-task-meta {
  display: flex;
  flex-wrap: wrap;
  gap: 2px 10px;
  padding: 0 6px 4px;
  color: var(--jp-ui-font-color2);
  font-size: var(--jp-ui-font-size0);
}

.tacc-server-mark {
  color: var(--jp-brand-color0);
  border: var(--jp-border-width) solid var(--jp-brand-color2);
  border-radius: var(--jp-border-radius);
  padding: 0 4px;
}

.tacc-queue {
  padding: 0 6px 4px;
  font-size: var(--jp-ui-font-size0);
  overflow-wrap: anywhere;
}
.tacc-queue-head { color: var(--jp-warn-color0); font-weight: 600; }
.tacc-queue-detail { color: var(--jp-ui-font-color1); }
.tacc-queue.tacc-overquota {
  margin: 0 6px 4px;
  padding: 3px 6px;
  background: var(--jp-layout-color2);
  border-left: 3px solid var(--jp-error-color1);
}
.tacc-overquota .tacc-queue-head { color: var(--jp-error-color1); }
.tacc-reason { color: var(--jp-ui-font-color2); font-style: italic; }

.tacc-status {
  font-size: var(--jp-ui-font-size0);
  font-weight: 600;
  padding: 0 4px;
  border-radius: var(--jp-border-radius);
  border: var(--jp-border-width) solid var(--jp-border-color1);
  color: var(--jp-ui-font-color1);
  white-space: nowrap;
}

.tacc-status-running, .tacc-status-starting { color: var(--jp-brand-color0); border-color: var(--jp-brand-color1); }
.tacc-status-succeeded { color: var(--jp-success-color0); border-color: var(--jp-success-color1); }
.tacc-status-failed, .tacc-status-lost { color: var(--jp-error-color0); border-color: var(--jp-error-color1); }
.tacc-status-pending, .tacc-status-cancelling { color: var(--jp-warn-color0); border-color: var(--jp-warn-color1); }
.tacc-status-cancelled { color: var(--jp-ui-font-color2); }

.tacc-task-body { padding: 4px 6px 6px; border-top: var(--jp-border-width) solid var(--jp-border-color2); }

.tacc-log-bar { display: flex; justify-content: space-between; align-items: flex-start; gap: 6px; margin: 4px 0 2px; }
.tacc-log-state { color: var(--jp-ui-font-color2); font-size: var(--jp-ui-font-size0); min-width: 0; overflow-wrap: anywhere; }
.tacc-log-state[data-state='waiting'] { color: var(--jp-warn-color0); }
.tacc-follow { font-size: var(--jp-ui-font-size0); color: var(--jp-ui-font-color2); white-space: nowrap; }
.tacc-log-text.tacc-log-empty { display: none; }

.tacc-spec-summary {
  display: grid;
  grid-template-columns: max-content minmax(0, 1fr);
  gap: 2px 8px;
  margin: 4px 0 6px;
}
.tacc-spec-summary dt { color: var(--jp-ui-font-color2); }
.tacc-spec-summary dd { margin: 0; overflow-wrap: anywhere; }
.tacc-digest-row { display: flex; align-items: center; gap: 6px; min-width: 0; }
.tacc-spec-digest {
  font-family: var(--jp-code-font-family);
  font-size: var(--jp-ui-font-size0);
  white-space: nowrap;
  overflow: hidden;
  text-overflow: ellipsis;
  min-width: 0;
}
.tacc-panel .jp-Button.tacc-btn.tacc-copy {
  height: 18px;
  line-height: 16px;
  padding: 0 4px;
  font-size: var(--jp-ui-font-size0);
  flex: 0 0 auto;
  border-color: var(--jp-border-color2);
}
.tacc-copy .tacc-icon svg { width: 12px; height: 12px; }
.tacc-spec-bar { display: flex; justify-content: space-between; align-items: center; margin: 2px 0; }

.tacc-log-text, .tacc-spec-text, .tacc-preview-pre {
  font-family: var(--jp-code-font-family);
  font-size: var(--jp-code-font-size);
  background: var(--jp-layout-color2);
  color: var(--jp-content-font-color1);
  border: var(--jp-border-width) solid var(--jp-border-color2);
  padding: 4px;
  margin: 0;
  white-space: pre-wrap;
  overflow-wrap: anywhere;
  max-height: 320px;
  overflow: auto;
}

.tacc-cluster {
  border: var(--jp-border-width) solid var(--jp-border-color2);
  border-radius: var(--jp-border-radius);
  padding: 4px 6px;
  margin-bottom: 6px;
}

.tacc-cluster-sum { font-weight: 600; margin-bottom: 4px; }
.tacc-switch-head { color: var(--jp-ui-font-color2); margin-top: 4px; }
.tacc-node { display: flex; align-items: center; gap: 8px; padding: 1px 0; }
.tacc-node-name { min-width: 80px; }
.tacc-node-down { opacity: 0.6; }
.tacc-gpus { display: inline-flex; gap: 2px; }

.tacc-gpu {
  display: inline-block;
  width: 8px;
  height: 10px;
  border: var(--jp-border-width) solid var(--jp-success-color1);
  background: var(--jp-success-color3);
}

.tacc-gpu.tacc-gpu-used { border-color: var(--jp-brand-color1); background: var(--jp-brand-color1); }

/* Submit dialog */
.tacc-submit-dialog { min-width: 420px; max-width: 720px; color: var(--jp-ui-font-color1); }
.tacc-fields { display: grid; grid-template-columns: repeat(auto-fill, minmax(130px, 1fr)); gap: 6px; margin: 6px 0; }
.tacc-field { display: flex; flex-direction: column; gap: 2px; }
.tacc-field label { font-size: var(--jp-ui-font-size0); color: var(--jp-ui-font-color2); }
.tacc-preview { display: flex; flex-direction: column; gap: 3px; }
.tacc-preview-pre { max-height: 200px; }
.tacc-digest { word-break: break-all; }
.tacc-notes li { color: var(--jp-warn-color0); }
.tacc-check { display: block; margin: 4px 0; color: var(--jp-ui-font-color1); }
.tacc-btn:disabled { opacity: 0.45; cursor: default; }

/* A running task: time left, GPU sparkline, attempt, web ports, Terminal and Extend */
.tacc-run {
  display: flex;
  flex-wrap: wrap;
  align-items: center;
  gap: 2px 12px;
  padding: 0 6px 4px;
  font-size: var(--jp-ui-font-size0);
}
.tacc-run:empty { display: none; }
.tacc-timeleft { color: var(--jp-ui-font-color1); white-space: nowrap; }
.tacc-timeleft-soon { color: var(--jp-warn-color0); font-weight: 600; }
.tacc-spark { display: inline-flex; align-items: center; gap: 3px; white-space: nowrap; }
.tacc-spark-svg { display: block; overflow: visible; }
.tacc-spark-line { fill: none; stroke: var(--jp-brand-color1); stroke-width: 1.25; stroke-linejoin: round; }
.tacc-spark-area { fill: var(--jp-brand-color1); opacity: 0.15; stroke: none; }
.tacc-spark-base { stroke: var(--jp-border-color2); stroke-width: 1; }
.tacc-attempt {
  color: var(--jp-warn-color0);
  border: var(--jp-border-width) solid var(--jp-warn-color2);
  border-radius: var(--jp-border-radius);
  padding: 0 4px;
  white-space: nowrap;
}

.tacc-ports {
  display: flex;
  flex-wrap: wrap;
  align-items: center;
  gap: 4px 6px;
  padding: 0 6px 5px;
  font-size: var(--jp-ui-font-size0);
}
.tacc-ports-label { color: var(--jp-ui-font-color2); }
.tacc-port {
  display: inline-flex;
  align-items: center;
  gap: 2px;
  font-family: var(--jp-code-font-family);
  color: var(--jp-content-link-color, var(--jp-brand-color1));
  border: var(--jp-border-width) solid var(--jp-border-color1);
  border-radius: var(--jp-border-radius);
  padding: 0 5px;
  line-height: 16px;
  text-decoration: none;
  white-space: nowrap;
}
a.tacc-port:hover { background: var(--jp-layout-color2); border-color: var(--jp-brand-color1); }
.tacc-port-idle { color: var(--jp-ui-font-color2); border-style: dashed; }
.tacc-ext { font-size: 0.9em; opacity: 0.8; }
.tacc-panel a.jp-Button.tacc-btn.tacc-tensorboard {
  height: 20px;
  line-height: 18px;
  padding: 0 8px;
  font-size: var(--jp-ui-font-size0);
  font-weight: 600;
  text-decoration: none;
  color: #fff;
  background: var(--jp-brand-color1);
  border: var(--jp-border-width) solid var(--jp-brand-color1);
  border-radius: var(--jp-border-radius);
}
.tacc-panel a.jp-Button.tacc-btn.tacc-tensorboard:hover { background: var(--jp-brand-color0); }
.tacc-panel a.jp-Button.tacc-tensorboard.tacc-disabled { opacity: 0.45; pointer-events: none; }

.tacc-run-actions { display: flex; flex-wrap: wrap; gap: 4px; margin-bottom: 4px; }
.tacc-glyph { font-family: var(--jp-code-font-family); font-size: var(--jp-ui-font-size0); font-weight: 600; }
.tacc-attempts {
  list-style: none;
  margin: 0 0 4px;
  padding: 2px 6px;
  font-size: var(--jp-ui-font-size0);
  color: var(--jp-ui-font-color2);
  border-left: 2px solid var(--jp-warn-color2);
}

/* Extend dialog */
.tacc-extend { display: flex; flex-direction: column; gap: 8px; min-width: 320px; max-width: 460px; color: var(--jp-ui-font-color1); }
.tacc-extend-presets { display: flex; gap: 6px; }
.tacc-extend-presets .tacc-preset { height: 26px; padding: 0 12px; }
.jp-Dialog .tacc-extend .jp-Button.tacc-preset.jp-mod-reject {
  background: var(--jp-layout-color1);
  color: var(--jp-ui-font-color1);
  border: var(--jp-border-width) solid var(--jp-border-color1);
}
.jp-Dialog .tacc-extend .jp-Button.tacc-preset[aria-pressed='true'] {
  background: var(--jp-layout-color3);
  border-color: var(--jp-brand-color1);
}
.tacc-extend-input { width: 100%; box-sizing: border-box; }
.tacc-extend-input[aria-invalid='true'] { border-color: var(--jp-error-color1); }
.tacc-extend-preview { min-height: 1.3em; font-size: var(--jp-ui-font-size1); }
.tacc-extend-error { margin: 0; }

/* The terminal tab */
.tacc-terminal {
  background: var(--jp-layout-color0);
  padding: 4px 0 0 6px;
  overflow: hidden;
  box-sizing: border-box;
}
.tacc-terminal .xterm { height: 100%; }
.tacc-terminal .xterm-viewport { background-color: transparent !important; }
.tacc-terminal-where { padding: 0 8px; font-weight: 600; white-space: nowrap; line-height: var(--jp-private-toolbar-height, 24px); }
.tacc-terminal-state {
  padding: 0 8px;
  color: var(--jp-ui-font-color2);
  line-height: var(--jp-private-toolbar-height, 24px);
  white-space: nowrap;
}
.tacc-terminal-state[data-status='connected'] { color: var(--jp-success-color1); }
.tacc-terminal-state[data-status='error'] { color: var(--jp-error-color1); }

/* The settings and usage links under the header (panel.tsx UserLinks) and the Notifications dialog. */
.tacc-links { display: flex; flex-wrap: wrap; gap: 12px; padding: 0 8px 4px; font-size: var(--jp-ui-font-size1); }
.tacc-link {
  background: none; border: none; padding: 0; cursor: pointer; font: inherit;
  color: var(--jp-content-link-color); text-decoration: none;
}
.tacc-link:hover { text-decoration: underline; }
.tacc-notify { display: flex; flex-direction: column; gap: 8px; min-width: min(460px, 80vw); padding-top: 4px; }
.tacc-notify-row { display: flex; align-items: center; gap: 6px; flex-wrap: wrap; }
.tacc-notify-row > span:first-child { min-width: 4em; }
.tacc-notify-email, .tacc-notify-url { flex: 1 1 14em; min-width: 0; }
.tacc-notify select.tacc-notify-format { flex: 0 0 auto; width: auto; }
.tacc-notify fieldset { border: 1px solid var(--jp-border-color2); padding: 4px 8px; margin: 0; }
.tacc-notify-event { display: block; }
.tacc-notify-hooks ul, .tacc-notify-history ul { list-style: none; margin: 0; padding: 0; }
.tacc-notify-hook { display: flex; align-items: center; gap: 6px; }
.tacc-notify-hook code { overflow: hidden; text-overflow: ellipsis; white-space: nowrap; flex: 1 1 auto; min-width: 0; }
.tacc-notify-history li[data-status='failed'] { color: var(--jp-error-color1); }
`,""]),t.d(r,{},{A:c})},314(e){e.exports=function(e){var r=[];return r.toString=function(){return this.map(function(r){var t="",o=void 0!==r[5];return r[4]&&(t+="@supports (".concat(r[4],") {")),r[2]&&(t+="@media ".concat(r[2]," {")),o&&(t+="@layer".concat(r[5].length>0?" ".concat(r[5]):""," {")),t+=e(r),o&&(t+="}"),r[2]&&(t+="}"),r[4]&&(t+="}"),t}).join("")},r.i=function(e,t,o,a,n){"string"==typeof e&&(e=[[null,e,void 0]]);var c={};if(o)for(var i=0;i<this.length;i++){var l=this[i][0];null!=l&&(c[l]=!0)}for(var p=0;p<e.length;p++){var s=[].concat(e[p]);o&&c[s[0]]||(void 0!==n&&(void 0===s[5]||(s[1]="@layer".concat(s[5].length>0?" ".concat(s[5]):""," {").concat(s[1],"}")),s[5]=n),t&&(s[2]&&(s[1]="@media ".concat(s[2]," {").concat(s[1],"}")),s[2]=t),a&&(s[4]?(s[1]="@supports (".concat(s[4],") {").concat(s[1],"}"),s[4]=a):s[4]="".concat(a)),r.push(s))}},r}},601(e){e.exports=function(e){return e[1]}},72(e){var r=[];function t(e){for(var t=-1,o=0;o<r.length;o++)if(r[o].identifier===e){t=o;break}return t}function o(e,o){for(var a={},n=[],c=0;c<e.length;c++){var i=e[c],l=o.base?i[0]+o.base:i[0],p=a[l]||0,s="".concat(l," ").concat(p);a[l]=p+1;var d=t(s),u={css:i[1],media:i[2],sourceMap:i[3],supports:i[4],layer:i[5]};if(-1!==d)r[d].references++,r[d].updater(u);else{var f=function(e,r){var t=r.domAPI(r);return t.update(e),function(r){r?(r.css!==e.css||r.media!==e.media||r.sourceMap!==e.sourceMap||r.supports!==e.supports||r.layer!==e.layer)&&t.update(e=r):t.remove()}}(u,o);o.byIndex=c,r.splice(c,0,{identifier:s,updater:f,references:1})}n.push(s)}return n}e.exports=function(e,a){var n=o(e=e||[],a=a||{});return function(e){e=e||[];for(var c=0;c<n.length;c++){var i=t(n[c]);r[i].references--}for(var l=o(e,a),p=0;p<n.length;p++){var s=t(n[p]);0===r[s].references&&(r[s].updater(),r.splice(s,1))}n=l}}},659(e){var r={};e.exports=function(e,t){var o=function(e){if(void 0===r[e]){var t=document.querySelector(e);if(window.HTMLIFrameElement&&t instanceof window.HTMLIFrameElement)try{t=t.contentDocument.head}catch(e){t=null}r[e]=t}return r[e]}(e);if(!o)throw Error("Couldn't find a style target. This probably means that the value for the 'insert' parameter is invalid.");o.appendChild(t)}},540(e){e.exports=function(e){var r=document.createElement("style");return e.setAttributes(r,e.attributes),e.insert(r,e.options),r}},56(e,r,t){e.exports=function(e){var r=t.nc;r&&e.setAttribute("nonce",r)}},825(e){e.exports=function(e){if("u"<typeof document)return{update:function(){},remove:function(){}};var r=e.insertStyleElement(e);return{update:function(t){var o,a,n;o="",t.supports&&(o+="@supports (".concat(t.supports,") {")),t.media&&(o+="@media ".concat(t.media," {")),(a=void 0!==t.layer)&&(o+="@layer".concat(t.layer.length>0?" ".concat(t.layer):""," {")),o+=t.css,a&&(o+="}"),t.media&&(o+="}"),t.supports&&(o+="}"),(n=t.sourceMap)&&"u">typeof btoa&&(o+="\n/*# sourceMappingURL=data:application/json;base64,".concat(btoa(unescape(encodeURIComponent(JSON.stringify(n))))," */")),e.styleTagTransform(o,r,e.options)},remove:function(){var e;null===(e=r).parentNode||e.parentNode.removeChild(e)}}}},113(e){e.exports=function(e,r){if(r.styleSheet)r.styleSheet.cssText=e;else{for(;r.firstChild;)r.removeChild(r.firstChild);r.appendChild(document.createTextNode(e))}}},99(e,r,t){var o=t(72),a=t.n(o),n=t(825),c=t.n(n),i=t(659),l=t.n(i),p=t(56),s=t.n(p),d=t(540),u=t.n(d),f=t(113),x=t.n(f),h=t(475),v={};v.styleTagTransform=x(),v.setAttributes=s(),v.insert=l().bind(null,"head"),v.domAPI=c(),v.insertStyleElement=u(),a()(h.A,v),h.A&&h.A.locals&&h.A.locals;var m=t(739),g={};g.styleTagTransform=x(),g.setAttributes=s(),g.insert=l().bind(null,"head"),g.domAPI=c(),g.insertStyleElement=u(),a()(m.A,g),m.A&&m.A.locals&&m.A.locals;var b=t(914),w={};w.styleTagTransform=x(),w.setAttributes=s(),w.insert=l().bind(null,"head"),w.domAPI=c(),w.insertStyleElement=u(),a()(b.A,w),b.A&&b.A.locals&&b.A.locals}}]);