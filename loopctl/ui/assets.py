"""The dashboard's stylesheet and script, served by the server itself (nothing from a CDN)."""

from __future__ import annotations

CSS = """
:root { --fg:#1d2330; --muted:#6b7280; --line:#e5e7eb; --ok:#137333; --bad:#b3261e;
  --warn:#8a5a00; --live:#1a56db; --bg:#fafafa; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color:var(--fg);
  background:var(--bg); }
header { display:flex; flex-wrap:wrap; gap:4px 16px; align-items:center; padding:10px 24px;
  background:#111827; color:#f9fafb; }
header .proj { color:#9ca3af; font-family:ui-monospace, monospace; font-size:12px;
  min-width:0; overflow:hidden; text-overflow:ellipsis; white-space:nowrap; flex:1 1 0; }
header nav { margin-left:auto; display:flex; gap:4px; }
header nav a { color:#d1d5db; text-decoration:none; padding:4px 10px; border-radius:6px; }
header nav a.on, header nav a:hover { background:#374151; color:#fff; }
main { padding:16px 24px 48px; max-width:1280px; }
h1, p, li, td { overflow-wrap:anywhere; }
/* A wide table scrolls inside its own box; the page never scrolls sideways. */
.table-wrap { max-width:100%; overflow-x:auto; -webkit-overflow-scrolling:touch; }
.table-wrap > table { min-width:100%; }
.table-wrap th, .table-wrap td { overflow-wrap:normal; }
table.loops td:first-child { white-space:nowrap; }
tr.skipped td { color:var(--muted); background:#fafafa; }
svg.chart { max-width:100%; height:auto; }
h1 { font-size:20px; margin:8px 0 4px; } h2 { font-size:15px; margin:18px 0 6px; }
h3 { font-size:14px; margin:12px 0 2px; }
table { border-collapse:collapse; width:100%; background:#fff; border:1px solid var(--line); }
th, td { text-align:left; padding:6px 10px; border-bottom:1px solid var(--line);
  vertical-align:middle; }
thead th { background:#f3f4f6; font-weight:600; font-size:12px; text-transform:uppercase;
  letter-spacing:.03em; color:#374151; }
table.facts th { width:130px; color:var(--muted); font-weight:500; background:#fff; }
a { color:var(--live); }
code, pre { font-family:ui-monospace, SFMono-Regular, Menlo, monospace; font-size:12.5px; }
pre { background:#fff; border:1px solid var(--line); padding:10px; overflow:auto;
  max-height:70vh; white-space:pre; margin:0; max-width:100%; }
pre.output { white-space:pre-wrap; word-break:break-word; }
.muted { color:var(--muted); }
.drift.bad { color:var(--bad); }
.badge { display:inline-block; padding:1px 8px; border-radius:999px; font-size:12px;
  background:#e5e7eb; color:#374151; white-space:nowrap; }
.badge.ok { background:#e6f4ea; color:var(--ok); }
.badge.bad { background:#fce8e6; color:var(--bad); }
.badge.warn { background:#fef3c7; color:var(--warn); }
.badge.live { background:#e1effe; color:var(--live); }
td.runs a { text-decoration:none; margin-right:6px; display:inline-flex; gap:3px;
  align-items:center; }
td.runs small { color:var(--muted); }
td.warm { white-space:nowrap; } td.warm small { display:block; color:var(--muted); }
svg.chart rect.bar { fill:#60a5fa; } svg.chart rect.zero { fill:#e5e7eb; }
svg.chart text { font-size:10px; fill:var(--muted); }
section.total { margin:8px 0 16px; }
pre.diff .add { color:var(--ok); background:#e6f4ea; display:inline-block; min-width:100%; }
pre.diff .del { color:var(--bad); background:#fce8e6; display:inline-block; min-width:100%; }
pre.diff .hunk { color:#6f42c1; } pre.diff .file { color:#111827; font-weight:600; }
section.actions, div.deliver { display:flex; gap:12px; flex-wrap:wrap; margin:10px 0;
  align-items:flex-start; }
form.act { display:flex; flex-wrap:wrap; gap:6px; align-items:flex-start; max-width:100%; }
form.act input, form.act textarea { font:inherit; padding:5px 8px; border:1px solid #d1d5db;
  border-radius:6px; min-width:200px; max-width:100%; }
form.act textarea { min-height:60px; }
button { font:inherit; padding:5px 14px; border-radius:6px; border:1px solid #d1d5db;
  background:#fff; cursor:pointer; }
form.approve button { background:var(--ok); color:#fff; border-color:var(--ok); }
form.reject button { background:#fff; color:var(--bad); border-color:var(--bad); }
form.retry button, form.reply button { background:var(--live); color:#fff;
  border-color:var(--live); }
form.changes button { background:#fff; color:var(--warn); border-color:var(--warn); }
.notice { padding:8px 12px; border-radius:6px; } .notice.ok { background:#e6f4ea; }
.notice.live { background:#e1effe; color:var(--live); }
.notice.live .msg::before { content:"● "; }
.notice.bad, p.bad { background:#fce8e6; color:var(--bad); padding:8px 12px; border-radius:6px; }
p.summary { font-size:15px; }
ol.timeline { list-style:none; padding:0; margin:0; background:#fff; border:1px solid var(--line);
  font-family:ui-monospace, monospace; font-size:12.5px; }
ol.timeline li { padding:3px 10px; border-bottom:1px solid #f3f4f6; white-space:pre-wrap; }
ol.timeline li.new { background:#eff6ff; }
#agent-output { max-height:50vh; overflow-y:auto; }
ol.timeline .off { color:var(--muted); display:inline-block; min-width:60px; text-align:right;
  margin-right:6px; }
ul.plain, ol.plain { padding-left:20px; }
.live-dot { color:var(--live); } .live-dot::before { content:"● "; }
details { margin:4px 0; } summary { cursor:pointer; }
.attempt { margin-bottom:12px; }
.pager { margin-top:10px; }
@media (max-width: 640px) {
  header { padding:8px 12px; } main { padding:12px 12px 40px; }
  table.facts th { width:auto; white-space:nowrap; padding-right:6px; }
  form.act input, form.act textarea { min-width:0; flex:1 1 12em; }
  /* Rows as cards: the cells flow on a line, a wide one (a summary, a chart) takes its own. */
  table.stack thead { display:none; }
  table.stack tbody { display:block; }
  table.stack tr { display:flex; flex-wrap:wrap; align-items:center; gap:4px 12px;
    padding:8px 10px; border-bottom:1px solid var(--line); }
  table.stack td { display:block; padding:0; border:none; overflow-wrap:anywhere; }
  table.stack td.wide { flex-basis:100%; }
  table.stack td.nil { display:none; }
  table.stack td[data-label]::before { content:attr(data-label) " "; color:var(--muted); }
  table.loops td:first-child { white-space:normal; font-size:15px; }
}
"""

# Actions followed in place (a long poll of /jobs/ID), and live updates of a running run's
# timeline: server-sent events from the log. Text is set with
# textContent, never as HTML.
JS = """
"use strict";
(function () {
  // An action answers at once with a job; this follows the job and shows its progress and
  // its result in place (no reload). One click, one decision: the buttons stay disabled.
  const notice = document.getElementById("notice");
  function show(state, text, tone) {
    if (!notice) return;
    notice.hidden = false;
    notice.className = "notice " + tone;
    notice.dataset.state = state;
    notice.textContent = "";
    const msg = document.createElement("span");
    msg.className = "msg";
    msg.textContent = text;
    notice.appendChild(msg);
  }
  function link(run, text) {
    if (!notice || !run) return;
    notice.appendChild(document.createTextNode(" · "));
    const a = document.createElement("a");
    a.href = "/runs/" + encodeURIComponent(run);
    a.textContent = "run " + run;
    notice.appendChild(a);
    if (text) notice.appendChild(document.createTextNode(": " + text));
  }
  // The item's state, actions and history from this server's own page, once the job is done.
  function refresh() {
    return fetch(window.location.pathname, { credentials: "same-origin" })
      .then(function (answer) { return answer.text(); })
      .then(function (text) {
        const fresh = new DOMParser().parseFromString(text, "text/html");
        for (const id of ["item-head", "actions", "evidence", "history"]) {
          const mine = document.getElementById(id);
          const theirs = fresh.getElementById(id);
          if (mine && theirs) mine.replaceWith(document.adoptNode(theirs));
        }
        wire();
      })
      .catch(function () {});
  }
  function follow(url) {
    fetch(url + "?wait=20", { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (answer) {
        if (!answer.ok) throw new Error("the job's state: HTTP " + answer.status);
        return answer.json();
      })
      .then(function (job) {
        if (!job.done) {
          show("running", job.action + " is running…", "live");
          link(job.run, job.progress);
          follow(url);
          return;
        }
        show("done", job.message, job.ok ? "ok" : "bad");
        link(job.run, "");
        refresh();
      })
      .catch(function (error) {
        const why = String(error.message || error);
        show("done", why + " (reload the page to see where it is)", "bad");
      });
  }
  function wire() {
    for (const form of document.querySelectorAll("form.act")) {
      form.addEventListener("submit", function (event) {
        event.preventDefault();
        for (const button of document.querySelectorAll("form.act button")) button.disabled = true;
        const action = form.querySelector("button").value;
        show("running", action + " is running…", "live");
        fetch(form.action, {
          method: "POST",
          credentials: "same-origin",
          headers: { Accept: "application/json" },
          body: new URLSearchParams(new FormData(form)),
        })
          .then(function (answer) {
            if (answer.status !== 202) {
              return answer.text().then(function (text) {
                const page = new DOMParser().parseFromString(text, "text/html");
                throw new Error(page.body ? page.body.textContent.trim() : "HTTP " + answer.status);
              });
            }
            return answer.json();
          })
          .then(function (job) {
            if (notice) notice.dataset.job = job.state;
            follow(job.state);
          })
          .catch(function (error) {
            show("done", String(error.message || error), "bad");
            for (const button of document.querySelectorAll("form.act button")) {
              button.disabled = false;
            }
          });
      });
    }
  }
  wire();
  // A plain form (or a reload) landed here with a job still running: follow it too.
  if (notice && notice.dataset.state === "running" && notice.dataset.job) {
    follow(notice.dataset.job);
  }
})();
(function () {
  const timeline = document.getElementById("timeline");
  if (!timeline || !timeline.dataset.stream) return;
  const status = document.getElementById("run-status");
  // The run ended: the tasks and the attempts' files come from this server's own page.
  function refresh(finalStatus) {
    fetch(window.location.href, { credentials: "same-origin" })
      .then(function (answer) { return answer.text(); })
      .then(function (text) {
        const fresh = new DOMParser().parseFromString(text, "text/html");
        for (const id of ["tasks", "attempts", "run-status"]) {
          const mine = document.getElementById(id);
          const theirs = fresh.getElementById(id);
          if (mine && theirs) mine.replaceWith(document.adoptNode(theirs));
        }
      })
      .catch(function () {
        if (status) status.dataset.status = finalStatus;
      });
  }
  const output = document.getElementById("agent-output");
  // Where each capture file was already shown up to: a reconnected stream sends it again.
  const shownUpTo = {};
  function printed(event) {
    if (!output || (shownUpTo[event.file] || 0) >= event.end) return;
    shownUpTo[event.file] = event.end;
    const waiting = output.querySelector("li.muted");
    if (waiting) waiting.remove();
    const line = document.createElement("li");
    line.className = "new";
    line.textContent = event.text;
    output.appendChild(line);
  }
  const source = new EventSource(timeline.dataset.stream);
  source.onmessage = function (message) {
    const event = JSON.parse(message.data);
    if (event.kind === "output") {
      printed(event);
      return;
    }
    const line = document.createElement("li");
    line.dataset.seq = String(event.seq);
    line.className = "new";
    const offset = document.createElement("span");
    offset.className = "off";
    offset.textContent = "+" + event.offset.toFixed(1) + "s";
    line.appendChild(offset);
    line.appendChild(document.createTextNode(event.text));
    timeline.appendChild(line);
    if (event.finished) {
      source.close();
      const dot = document.querySelector(".live-dot");
      if (dot) dot.remove();
      refresh(event.status);
    }
  };
})();
"""
