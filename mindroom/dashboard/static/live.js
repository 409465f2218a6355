// Refreshes the status tables every two seconds from /api/status (no reload needed).
"use strict";
function cell(text) { const td = document.createElement("td"); td.textContent = text; return td; }
function fill(id, rows) {
  const body = document.getElementById(id);
  if (!body) return;
  if (rows.length === 0) {  // an empty table says so
    const td = cell("none yet");
    td.className = "muted";
    td.colSpan = body.parentElement.querySelectorAll("th").length;
    const tr = document.createElement("tr");
    tr.className = "none-yet";
    tr.appendChild(td);
    body.replaceChildren(tr);
    return;
  }
  body.replaceChildren(...rows.map((cells) => {
    const tr = document.createElement("tr");
    cells.forEach((c) => tr.appendChild(cell(c)));
    return tr;
  }));
}
function ago(seconds) { return seconds === null ? "never" : `${Math.round(seconds)} s ago`; }
async function refresh() {
  try {
    const response = await fetch("/api/status", { credentials: "same-origin" });
    if (!response.ok) return;
    const s = await response.json();
    fill("accounts", s.accounts.map((a) => [a.name, a.user_id, a.device_id || "",
      a.problem ? `failing: ${a.problem}` : `synced ${ago(a.synced_ago_s)}`, String(a.rooms)]));
    fill("rooms", s.rooms.map((r) => [r.name, r.room_id, r.agents.join(", ")]));
    fill("answers", s.answers.map((a) => [a.when, a.room, a.sender, a.responders.join(", ") || "—", a.status,
      a.latency_ms === null ? "" : `${a.latency_ms} ms`]));
    fill("problems", s.problems.map((p) => [p.when, p.level, p.logger, p.message]));
    const stamp = document.getElementById("updated");
    if (stamp) stamp.textContent = new Date().toLocaleTimeString();
  } catch (e) { /* the bot is restarting: the next tick tries again */ }
}
refresh();
setInterval(refresh, 2000);
