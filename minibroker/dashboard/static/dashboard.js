// The minibroker dashboard page: renders /api/stream's state and applies its patches in place
// (a row changes only when its partition did), keeps the event timeline, and sends the fault
// buttons' requests with the session token. Plain JavaScript: no build step.
"use strict";

const MAX_EVENT_ROWS = 500;
const KEPT_EVENTS = 2000;
const MARK_EVENTS = new Set(["isr_shrink", "isr_expand", "leader_elected", "became_leader"]);
let token = "";
let faultMode = null;
let faultsHint = "";
let state = null;
let selected = null;
const rows = new Map(); // partition key -> <tr>
const events = []; // kept events, oldest first

const $ = (sel) => document.querySelector(sel);

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (v !== null && v !== undefined) node.setAttribute(k, v);
  }
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}

// ---- the cluster panel ------------------------------------------------------------------------

function renderCluster() {
  $("#zk").textContent = `ZooKeeper ${state.zookeeper.connect}`;
  const banners = $("#banners");
  banners.replaceChildren(...state.banners.map((b) => el("div", { "data-banner": "" }, b)));
  const c = state.controller;
  const ctl = c.active === null
    ? "no active controller"
    : `active controller ${c.name} (id ${c.active}), controller epoch ${c.epoch}`;
  const standby = c.standby.length ? `; standby ${c.standby.join(", ")}` : "; no standby";
  $("#controller").replaceChildren(
    el("span", { id: "controller-active", "data-controller": c.active ?? "", "data-epoch": c.epoch ?? "" }, ctl + standby),
  );
  const tbody = $("#brokers tbody");
  tbody.replaceChildren(...state.brokers.map((b) => el("tr", { "data-broker-id": b.id, "data-alive": b.alive },
    el("td", {}, b.name),
    el("td", { class: b.alive ? "alive" : "dead" }, b.alive ? (b.answered ? "alive" : "registered, not answering") : "down"),
    el("td", {}, b.broker_epoch ?? "-"),
    el("td", { "data-rack": b.rack }, b.rack || "-"),
    el("td", {}, b.endpoints.join(" ")),
    el("td", { "data-throttle": b.throttle ? "on" : "off" }, throttleText(b.throttle)),
    el("td", {}, ...(faultMode === null ? [el("span", { class: "hint", title: faultsHint }, "see below")]
      : faultButtons(b.name, ["kill", "stop", "pause", "resume", "start", "isolate", "heal"]))),
  )));
  const h = state.health;
  $("#health").replaceChildren(...Object.entries(h).map(([k, v]) =>
    el("span", { class: v > 0 ? "bad" : "", "data-metric": k }, `${k} ${v}`)));
  $("#cluster-faults").replaceChildren(
    ...faultButtons("controller", ["kill"], "kill active controller"),
    ...faultButtons("", ["elect-preferred"], "preferred replica election"),
    ...(faultMode === null && faultsHint ? [el("div", { id: "faults-hint" }, faultsHint)] : []),
  );
}

function rate(n) {
  return n >= 1e6 ? `${(n / 1e6).toFixed(1)} MB/s` : `${(n / 1e3).toFixed(0)} KB/s`;
}

function throttleText(t) {
  // KIP-73: the broker's replication throttle rates and what it measured of throttled bytes.
  if (!t) return "-";
  return `leader ${rate(t.leader_measured)} of ${rate(t.leader_rate)}, ` +
    `follower ${rate(t.follower_measured)} of ${rate(t.follower_rate)}`;
}

function faultButtons(target, actions, label) {
  if (faultMode === null && !actions.includes("elect-preferred")) return [];
  return actions.map((a) => el("button", {
    "data-action": a, "data-target": target,
    onclick: () => askFault(a, target),
  }, label || a));
}

// ---- partitions ---------------------------------------------------------------------------------
// A row is made once and then updated in place, and only where a value changed: at thousands
// of partitions, remaking rows (and the layout that follows) is what made the page fall behind.

function setAttr(node, name, value) {
  const v = String(value);
  if (node.getAttribute(name) !== v) node.setAttribute(name, v);
}

function setText(node, value) {
  const v = String(value);
  if (node.textContent !== v) node.textContent = v;
}

function clockOf(ms) {
  return new Date(ms).toLocaleTimeString([], { hour12: false });
}

function fillReplica(span, p, r) {
  const lag = r.lag === null ? "?" : r.lag;
  const ago = r.caught_up_ms_ago === null ? "?" : `${(r.caught_up_ms_ago / 1000).toFixed(0)}s`;
  const leo = r.log_end_offset ?? (r.reachable ? "-" : "?");
  // The leader's LSO next to its HW when a transaction holds it below: what read_committed
  // consumers may read up to.
  const lso = r.broker === p.leader && p.last_stable_offset !== null &&
    p.last_stable_offset !== undefined && p.last_stable_offset !== r.high_watermark
    ? ` (LSO ${p.last_stable_offset})` : "";
  const hw = (r.high_watermark ?? (r.reachable ? "-" : "?")) + lso;
  // The log start offset only when retention or DeleteRecords has moved it off 0.
  const start = r.log_start_offset ? `${r.log_start_offset}…` : "";
  setAttr(span, "class", ["replica", r.in_isr ? "in" : "out", r.broker === p.leader ? "leader" : "",
    r.log_end_offset === null ? "unknown" : "", r.live ? "" : "down",
    r.adding ? "adding" : "", r.removing ? "removing" : ""].join(" "));
  setAttr(span, "data-broker", r.broker);
  setAttr(span, "data-leo", r.log_end_offset ?? "");
  setAttr(span, "data-log-start", r.log_start_offset ?? "");
  setAttr(span, "data-hw", r.high_watermark ?? "");
  setAttr(span, "data-in-isr", r.in_isr);
  setAttr(span, "data-live", r.live);
  setAttr(span, "data-adding", r.adding);
  setAttr(span, "data-removing", r.removing);
  const role = r.adding ? "being added by a reassignment" : r.removing ? "being removed by a reassignment" : "";
  const isr = r.in_isr ? "in the ISR" : "out of the ISR";
  setAttr(span, "title", [isr, role, r.live ? "" : "its broker is down"].filter(Boolean).join("; "));
  const mark = r.adding ? "+" : r.removing ? "−" : "";
  if (!r.live) {
    // A down broker's last fetch says nothing of it now: no lag, no "last caught up".
    const since = r.down_since_ms ? ` since ${clockOf(r.down_since_ms)}` : "";
    setText(span, `${mark}${r.broker}: down${since}`);
  } else {
    setText(span, `${mark}${r.broker}: ${start}${leo} / ${hw} / ${lag} / ${ago}`);
  }
}

function newRow(p) {
  const tr = el("tr", { "data-topic": p.topic, "data-partition": p.partition, "data-key": p.key },
    el("td", {}, p.key), el("td"), el("td"), el("td"), el("td"), el("td", { class: "replicas" }));
  fillRow(tr, p);
  return tr;
}

function fillRow(tr, p) {
  const quiet = hangingFor(p);
  setAttr(tr, "class", ["partition", p.offline ? "offline" : p.under_replicated ? "under" : "",
    p.key === selected ? "selected" : "", p.reassigning ? "reassigning" : "",
    p.throttled ? "throttled" : "", quiet !== null ? "hanging" : ""].join(" "));
  setAttr(tr, "data-reassigning", p.reassigning);
  setAttr(tr, "data-throttled", p.throttled);
  setAttr(tr, "data-leader", p.leader ?? -1);
  setAttr(tr, "data-isr", [...p.isr].sort((a, b) => a - b).join(","));
  setAttr(tr, "data-leader-epoch", p.leader_epoch ?? "");
  // The leader's last stable offset (read_committed consumers read below it) and its open
  // transactions: shown when a transaction holds the LSO below the HW.
  setAttr(tr, "data-lso", p.last_stable_offset ?? "");
  setAttr(tr, "data-open-txns", (p.open_transactions || []).length);
  const [, leader, epoch, replicas, isr, cells] = tr.children;
  setText(leader, p.leader ?? "none");
  setText(epoch, p.leader_epoch ?? "-");
  // Words, not symbols: a stopwatch glyph is missing from common fonts (Debian's chromium).
  const open = (p.open_transactions || []).length;
  setAttr(tr, "data-hanging", quiet !== null);
  const hanging = quiet === null ? "" : `, HANGING: quiet ${(quiet / 1000).toFixed(0)}s`;
  const txns = open ? `${open} open txn${open > 1 ? "s" : ""}, LSO ${p.last_stable_offset}${hanging}` : "";
  const marks = [p.reassigning ? "moving" : "", p.throttled ? "throttled" : "", txns].filter(Boolean);
  setText(replicas, p.replicas.join(",") + (marks.length ? ` (${marks.join(", ")})` : ""));
  setText(isr, p.isr.join(","));
  while (cells.children.length > p.replicas_state.length) cells.lastChild.remove();
  while (cells.children.length < p.replicas_state.length) cells.append(el("span"));
  p.replicas_state.forEach((r, i) => fillReplica(cells.children[i], p, r));
  const hide = !visible(p.key);
  if (tr.hidden !== hide) tr.hidden = hide;
}

// An open transaction whose producer has written nothing to the partition for longer than the
// leader's transaction.max.timeout.ms is hanging (KIP-664's find-hanging rule): how long the
// quietest-for-longest one has been quiet, or null.
function hangingFor(p) {
  if (!p.txn_max_timeout_ms) return null;
  const quiet = (p.open_transactions || [])
    .filter((t) => t.last_timestamp > 0)
    .map((t) => Date.now() - t.last_timestamp);
  const longest = quiet.length ? Math.max(...quiet) : 0;
  return longest > p.txn_max_timeout_ms ? longest : null;
}

// A hanging mark depends on the clock, not only on what the server sends: rows with an open
// transaction are looked at again every second.
setInterval(() => {
  for (const p of state?.partitions || []) {
    if (!(p.open_transactions || []).length) continue;
    const tr = rows.get(p.key);
    if (tr) fillRow(tr, p);
  }
}, 1000);

function visible(key) {
  const f = $("#topic-filter").value.trim();
  return !f || key === f || key.startsWith(f + "-") || key.startsWith(f);
}

function renderPartitions() {
  const tbody = $("#partitions tbody");
  const wanted = new Set(state.partitions.map((p) => p.key));
  for (const [key, tr] of rows) if (!wanted.has(key)) { tr.remove(); rows.delete(key); }
  let before = null; // keep the server's order: rows new to the page go where they belong
  for (const p of [...state.partitions].reverse()) {
    let tr = rows.get(p.key);
    if (tr) fillRow(tr, p);
    else { tr = newRow(p); rows.set(p.key, tr); }
    if (tr.nextSibling !== before || tr.parentNode !== tbody) tbody.insertBefore(tr, before);
    before = tr;
  }
}

function applyPartitions(changed, removed) {
  const tbody = $("#partitions tbody");
  const byKey = new Map(state.partitions.map((p) => [p.key, p]));
  for (const key of removed) { byKey.delete(key); rows.get(key)?.remove(); rows.delete(key); }
  let added = false;
  for (const p of changed) {
    if (!byKey.has(p.key)) added = true;
    byKey.set(p.key, p);
    const tr = rows.get(p.key);
    if (tr) fillRow(tr, p);
    if (p.key === selected) window.chartAddSample(p, Date.now());
  }
  state.partitions = [...byKey.values()];
  if (added) {
    // New partitions (a topic created): the server's order is by topic and partition.
    state.partitions.sort((a, b) => a.topic < b.topic ? -1 : a.topic > b.topic ? 1 : a.partition - b.partition);
    renderPartitions();
  }
}

// ---- events -------------------------------------------------------------------------------------

function clock(ts) {
  const d = new Date(ts);
  return d.toTimeString().slice(0, 8) + "." + String(d.getMilliseconds()).padStart(3, "0");
}

function eventMatches(ev, f) {
  if ($("#event-story").checked && !ev.story) return false;
  if (!f) return true;
  if (ev.tp === f) return true;
  return JSON.stringify(ev).includes(`"${f}"`);
}

function eventRow(ev) {
  return el("tr", { "data-event": ev.event, "data-tp": ev.tp ?? "" },
    el("td", {}, clock(ev.ts)), el("td", {}, ev.proc ?? "?"),
    el("td", { class: "name" }, ev.event), el("td", {}, ev.text ?? ""));
}

// The page keeps the last KEPT_EVENTS events and shows the last MAX_EVENT_ROWS of those that
// pass the filters: a flood of other events cannot push the story out of view.
function addEvents(list) {
  const tbody = $("#events tbody");
  const f = $("#event-filter").value.trim();
  const fragment = document.createDocumentFragment();
  for (const ev of list.slice(-KEPT_EVENTS)) {
    events.push(ev);
    if (eventMatches(ev, f)) fragment.append(eventRow(ev));
  }
  while (fragment.childNodes.length > MAX_EVENT_ROWS) fragment.firstChild.remove();
  tbody.append(fragment);
  while (tbody.children.length > MAX_EVENT_ROWS) tbody.firstChild.remove();
  if (events.length > KEPT_EVENTS) events.splice(0, events.length - KEPT_EVENTS);
  followEvents();
  if (selected) window.chartSetMarks(events.filter((e) => e.tp === selected && MARK_EVENTS.has(e.event)));
}

// Scrolling needs a layout: done once per frame, where the frame lays the page out anyway,
// not once per batch (a forced layout of thousands of rows each time).
let followPending = false;
function followEvents() {
  if (followPending || !$("#event-follow").checked) return;
  followPending = true;
  requestAnimationFrame(() => {
    followPending = false;
    const box = $("#events-scroll");
    box.scrollTop = box.scrollHeight;
  });
}

function refilterEvents() {
  const f = $("#event-filter").value.trim();
  const shown = events.filter((ev) => eventMatches(ev, f)).slice(-MAX_EVENT_ROWS);
  $("#events tbody").replaceChildren(...shown.map(eventRow));
  followEvents();
}

// ---- the chart ----------------------------------------------------------------------------------

async function select(key) {
  selected = key;
  for (const [k, tr] of rows) tr.classList.toggle("selected", k === key);
  $("#chart-tp").textContent = key;
  const resp = await fetch(`/api/history?tp=${encodeURIComponent(key)}`);
  const body = await resp.json();
  const p = state.partitions.find((x) => x.key === key);
  window.chartShow(key, p ? p.replicas : [], body.samples);
  window.chartSetMarks(events.filter((e) => e.tp === key && MARK_EVENTS.has(e.event)));
}

// ---- faults -------------------------------------------------------------------------------------

function askFault(action, target) {
  const what = action === "elect-preferred" ? "start a preferred replica election for every partition"
    : target === "controller" ? `${action} the active controller` : `${action} ${target}`;
  const dialog = $("#confirm");
  $("#confirm-text").textContent = `Really ${what}?`;
  dialog.returnValue = "";
  dialog.onclose = () => { if (dialog.returnValue === "yes") sendFault(action, target); };
  dialog.showModal();
}

async function sendFault(action, target) {
  let body;
  try {
    const resp = await fetch("/api/fault", {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Minibroker-Token": token },
      body: JSON.stringify({ action, target }),
    });
    body = await resp.json();
  } catch (err) {
    body = { ok: false, message: `the dashboard server did not answer (${err})` };
  }
  toast(body.message, body.ok);
}

function toast(message, ok) {
  const t = $("#toast");
  t.textContent = message;
  t.dataset.ok = ok;
  t.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.hidden = true; }, 8000);
}

// ---- the stream ---------------------------------------------------------------------------------

// Messages are applied in batches, FLUSH_MS after the first of a burst: a partition that
// changed in several patches is drawn once, and the events of the burst are added at once.
const FLUSH_MS = 50;
let inbox = [];

function onMessage(msg) {
  inbox.push(msg);
  if (inbox.length === 1) setTimeout(flush, FLUSH_MS);
}

function flush() {
  const batch = inbox;
  inbox = [];
  let full = null;
  let clusterChanged = false;
  const changed = new Map();
  const removed = new Set();
  const newEvents = [];
  for (const msg of batch) {
    if (msg.type === "state" || (msg.type === "patch" && msg.full)) {
      full = msg.state || msg.full;
      changed.clear();
      removed.clear();
      if (msg.events) { $("#events tbody").replaceChildren(); events.length = 0; newEvents.length = 0; newEvents.push(...msg.events); }
    } else if (msg.type === "patch") {
      const target = full || state;
      Object.assign(target, msg.cluster);
      if (Object.keys(msg.cluster).length) clusterChanged = true;
      for (const key of msg.removed) { changed.delete(key); removed.add(key); }
      for (const p of msg.partitions) { removed.delete(p.key); changed.set(p.key, p); }
    } else if (msg.type === "events") {
      newEvents.push(...msg.events);
    }
  }
  if (full) {
    state = full;
    applyChanges(changed, removed);
    renderCluster();
    renderPartitions();
  } else if (state) {
    if (clusterChanged) renderCluster();
    applyPartitions([...changed.values()], [...removed]);
  }
  if (newEvents.length) addEvents(newEvents);
}

// A full state with patches after it in the same batch: the patches go into the state first.
function applyChanges(changed, removed) {
  if (!changed.size && !removed.size) return;
  const byKey = new Map(state.partitions.map((p) => [p.key, p]));
  for (const key of removed) byKey.delete(key);
  for (const [key, p] of changed) byKey.set(key, p);
  state.partitions = [...byKey.values()];
}

function connect() {
  const link = $("#link");
  const source = new EventSource("/api/stream");
  source.onopen = () => { link.dataset.state = "live"; link.textContent = "live"; };
  source.onmessage = (e) => onMessage(JSON.parse(e.data));
  source.onerror = () => {
    link.dataset.state = "down";
    link.textContent = "the dashboard server is unreachable; retrying";
  };
}

async function start() {
  for (;;) {
    try {
      const s = await (await fetch("/api/session")).json();
      token = s.token;
      faultMode = s.faults;
      faultsHint = s.faults_hint || "";
      break;
    } catch (err) {
      $("#link").textContent = "the dashboard server is unreachable; retrying";
      await new Promise((r) => setTimeout(r, 2000));
    }
  }
  $("#topic-filter").addEventListener("input", () => {
    for (const [k, tr] of rows) tr.hidden = !visible(k);
  });
  $("#partitions tbody").addEventListener("click", (e) => {
    const tr = e.target.closest("tr[data-key]");
    if (tr) select(tr.dataset.key);
  });
  $("#event-filter").addEventListener("input", refilterEvents);
  $("#event-story").addEventListener("change", refilterEvents);
  connect();
}

document.addEventListener("DOMContentLoaded", start);
