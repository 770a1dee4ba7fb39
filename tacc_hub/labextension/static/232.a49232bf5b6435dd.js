"use strict";(self.rspackChunktacc_hub_labextension=self.rspackChunktacc_hub_labextension||[]).push([[232],{475(r,o,a){var t=a(601),e=a.n(t),c=a(314),n=(a.n(c))()(e());n.push([r.id,`/* tacc_hub side panel: JupyterLab theme variables only (light and dark themes). */

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
  .tacc-actions .tacc-btn { padding: 0 5px; }
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
`,""]),a.d(o,{},{A:n})},314(r){r.exports=function(r){var o=[];return o.toString=function(){return this.map(function(o){var a="",t=void 0!==o[5];return o[4]&&(a+="@supports (".concat(o[4],") {")),o[2]&&(a+="@media ".concat(o[2]," {")),t&&(a+="@layer".concat(o[5].length>0?" ".concat(o[5]):""," {")),a+=r(o),t&&(a+="}"),o[2]&&(a+="}"),o[4]&&(a+="}"),a}).join("")},o.i=function(r,a,t,e,c){"string"==typeof r&&(r=[[null,r,void 0]]);var n={};if(t)for(var i=0;i<this.length;i++){var p=this[i][0];null!=p&&(n[p]=!0)}for(var l=0;l<r.length;l++){var s=[].concat(r[l]);t&&n[s[0]]||(void 0!==c&&(void 0===s[5]||(s[1]="@layer".concat(s[5].length>0?" ".concat(s[5]):""," {").concat(s[1],"}")),s[5]=c),a&&(s[2]&&(s[1]="@media ".concat(s[2]," {").concat(s[1],"}")),s[2]=a),e&&(s[4]?(s[1]="@supports (".concat(s[4],") {").concat(s[1],"}"),s[4]=e):s[4]="".concat(e)),o.push(s))}},o}},601(r){r.exports=function(r){return r[1]}},72(r){var o=[];function a(r){for(var a=-1,t=0;t<o.length;t++)if(o[t].identifier===r){a=t;break}return a}function t(r,t){for(var e={},c=[],n=0;n<r.length;n++){var i=r[n],p=t.base?i[0]+t.base:i[0],l=e[p]||0,s="".concat(p," ").concat(l);e[p]=l+1;var d=a(s),u={css:i[1],media:i[2],sourceMap:i[3],supports:i[4],layer:i[5]};if(-1!==d)o[d].references++,o[d].updater(u);else{var f=function(r,o){var a=o.domAPI(o);return a.update(r),function(o){o?(o.css!==r.css||o.media!==r.media||o.sourceMap!==r.sourceMap||o.supports!==r.supports||o.layer!==r.layer)&&a.update(r=o):a.remove()}}(u,t);t.byIndex=n,o.splice(n,0,{identifier:s,updater:f,references:1})}c.push(s)}return c}r.exports=function(r,e){var c=t(r=r||[],e=e||{});return function(r){r=r||[];for(var n=0;n<c.length;n++){var i=a(c[n]);o[i].references--}for(var p=t(r,e),l=0;l<c.length;l++){var s=a(c[l]);0===o[s].references&&(o[s].updater(),o.splice(s,1))}c=p}}},659(r){var o={};r.exports=function(r,a){var t=function(r){if(void 0===o[r]){var a=document.querySelector(r);if(window.HTMLIFrameElement&&a instanceof window.HTMLIFrameElement)try{a=a.contentDocument.head}catch(r){a=null}o[r]=a}return o[r]}(r);if(!t)throw Error("Couldn't find a style target. This probably means that the value for the 'insert' parameter is invalid.");t.appendChild(a)}},540(r){r.exports=function(r){var o=document.createElement("style");return r.setAttributes(o,r.attributes),r.insert(o,r.options),o}},56(r,o,a){r.exports=function(r){var o=a.nc;o&&r.setAttribute("nonce",o)}},206(r){r.exports=function(r){if("u"<typeof document)return{update:function(){},remove:function(){}};var o=r.insertStyleElement(r);return{update:function(a){var t,e,c;t="",a.supports&&(t+="@supports (".concat(a.supports,") {")),a.media&&(t+="@media ".concat(a.media," {")),(e=void 0!==a.layer)&&(t+="@layer".concat(a.layer.length>0?" ".concat(a.layer):""," {")),t+=a.css,e&&(t+="}"),a.media&&(t+="}"),a.supports&&(t+="}"),(c=a.sourceMap)&&"u">typeof btoa&&(t+="\n/*# sourceMappingURL=data:application/json;base64,".concat(btoa(unescape(encodeURIComponent(JSON.stringify(c))))," */")),r.styleTagTransform(t,o,r.options)},remove:function(){var r;null===(r=o).parentNode||r.parentNode.removeChild(r)}}}},113(r){r.exports=function(r,o){if(o.styleSheet)o.styleSheet.cssText=r;else{for(;o.firstChild;)o.removeChild(o.firstChild);o.appendChild(document.createTextNode(r))}}},579(r,o,a){var t=a(72),e=a.n(t),c=a(206),n=a.n(c),i=a(659),p=a.n(i),l=a(56),s=a.n(l),d=a(540),u=a.n(d),f=a(113),v=a.n(f),b=a(475),g={};g.styleTagTransform=v(),g.setAttributes=s(),g.insert=p().bind(null,"head"),g.domAPI=n(),g.insertStyleElement=u(),e()(b.A,g),b.A&&b.A.locals&&b.A.locals}}]);