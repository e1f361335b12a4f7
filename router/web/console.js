// Hop's web console: reads the routers' management agents through the JSON
// endpoint of the listener that served this page (docs/operations.md#the-web-console).
"use strict";

const API = "/api/v1/";
const POLL_MS = 2000;
const HISTORY_S = 300;

const state = {
  me: null,            // {user, write, router, authenticated}
  routers: [],         // router.node rows (or this router alone)
  data: {},            // router id -> {connections, links, addresses, router, configs}
  samples: {},         // counter key -> {value, time}
  history: [],         // [{time, in, out}]
  log: [],
};

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function svg(tag, attrs, text) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

async function api(path, options) {
  const response = await fetch(API + path, Object.assign({credentials: "same-origin"},
                                                          options || {}));
  const body = await response.json().catch(() => ({error: response.statusText}));
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

// QUERY results as objects.
async function query(type, router) {
  const where = router && router !== state.me.router ?
    "?router=" + encodeURIComponent(router) : "";
  const answer = await api(type + where);
  return answer.results.map(values => {
    const row = {};
    answer.attributeNames.forEach((name, i) => { row[name] = values[i]; });
    return row;
  });
}

// Per-second rate of a counter since the last sample (null on the first).
function rate(key, value, time) {
  const last = state.samples[key];
  state.samples[key] = {value, time};
  if (!last || time <= last.time || value < last.value) return null;
  return (value - last.value) / ((time - last.time) / 1000);
}

// An address as users write it: a router's key without its class and phase
// (M0orders: the mobile address orders).
function addressName(key) {
  return String(key || "").replace(/^M[0-9]?/, "");
}

function shown(value) {
  if (value === null || value === undefined) return "";
  if (typeof value === "number" && !Number.isInteger(value)) return value.toFixed(1);
  return String(value);
}

// -- reading --------------------------------------------------------------------

async function refresh() {
  const started = performance.now();
  let nodes = [];
  try {
    nodes = await query("router.node");
  } catch (error) {
    nodes = [];
  }
  state.routers = nodes.length ? nodes : [{id: state.me.router, linkState: [], linkCosts: {}}];
  const ids = state.routers.map(r => r.id);
  const now = Date.now();
  await Promise.all(ids.map(async id => {
    try {
      const [connections, links, addresses, routerRows, configs] = await Promise.all([
        query("connection", id), query("router.link", id), query("router.address", id),
        query("router", id), query("router.config.address", id)]);
      state.data[id] = {connections, links, addresses, router: routerRows[0] || {}, configs,
                        error: null};
    } catch (error) {
      state.data[id] = Object.assign(state.data[id] || {}, {error: error.message});
    }
  }));
  for (const id of Object.keys(state.data)) if (!ids.includes(id)) delete state.data[id];
  try {
    state.log = await api("log?limit=40");
  } catch (error) {
    state.log = [];
  }
  render(now);
  document.getElementById("status").textContent =
    "updated " + new Date(now).toLocaleTimeString() + " in " +
    Math.round(performance.now() - started) + " ms";
}

// -- drawing --------------------------------------------------------------------

function render(now) {
  const totals = {in: 0, out: 0, measured: false};
  for (const [id, data] of Object.entries(state.data)) {
    const r = data.router || {};
    const ingress = rate("in/" + id, r.deliveriesIngress || 0, now);
    const egress = rate("out/" + id, r.deliveriesEgress || 0, now);
    if (ingress !== null) { totals.in += ingress; totals.out += egress; totals.measured = true; }
  }
  if (totals.measured) {
    state.history.push({time: now, in: totals.in, out: totals.out});
    while (state.history.length && state.history[0].time < now - HISTORY_S * 1000) {
      state.history.shift();
    }
  }
  drawNetwork();
  drawThroughput(totals);
  fillAddresses(now);
  fillConfigs();
  fillConnections(now);
  fillLinks();
  fillLog();
  const stuck = Object.values(state.data).reduce(
    (sum, data) => sum + (data.links || []).reduce((n, l) => n + (l.deliveriesStuck || 0), 0), 0);
  const summary = document.getElementById("stuck-summary");
  summary.textContent = stuck ? stuck + " stuck deliver" + (stuck === 1 ? "y" : "ies")
                              : "no stuck deliveries";
  summary.className = "badge" + (stuck ? " alert" : "");
  summary.dataset.stuck = stuck;
}

function stuckOn(id) {
  return ((state.data[id] || {}).links || []).some(l => (l.deliveriesStuck || 0) > 0);
}

function drawNetwork() {
  const graph = document.getElementById("network");
  graph.replaceChildren();
  const width = 640, height = 420, cx = width / 2, cy = height / 2;
  const routers = state.routers;
  const radius = routers.length > 1 ? Math.min(width, height) / 2 - 90 : 0;
  const place = {};
  routers.forEach((r, i) => {
    const angle = -Math.PI / 2 + 2 * Math.PI * i / routers.length;
    place[r.id] = {x: cx + radius * Math.cos(angle), y: cy + radius * Math.sin(angle), angle};
  });
  const drawn = new Set();
  for (const r of routers) {
    for (const peer of r.linkState || []) {
      const pair = [r.id, peer].sort().join("\u0000");
      if (drawn.has(pair) || !place[peer]) continue;
      drawn.add(pair);
      const a = place[r.id], b = place[peer];
      const cost = (r.linkCosts || {})[peer];
      graph.append(svg("line", {class: "link", x1: a.x, y1: a.y, x2: b.x, y2: b.y,
                                "data-from": r.id, "data-to": peer,
                                "data-cost": cost === undefined ? "" : cost}));
      if (cost !== undefined) {
        graph.append(svg("text", {class: "cost", x: (a.x + b.x) / 2, y: (a.y + b.y) / 2 - 4},
                         cost));
      }
    }
  }
  for (const r of routers) {
    const at = place[r.id];
    const connections = (state.data[r.id] || {}).connections || [];
    const satellites = connections.filter(c => c.role === "edge" || c.role === "route-container");
    const clients = connections.filter(c => c.role === "normal").length;
    satellites.forEach((c, i) => {
      const spread = routers.length > 1 ? at.angle : -Math.PI / 2;
      const angle = spread + (i - (satellites.length - 1) / 2) * 0.55;
      const x = at.x + 78 * Math.cos(angle), y = at.y + 78 * Math.sin(angle);
      const kind = c.role === "edge" ? "edge" : "container";
      graph.append(svg("line", {class: "spoke", x1: at.x, y1: at.y, x2: x, y2: y}));
      const g = svg("g", {class: "node " + kind, "data-id": c.container || "",
                          "data-router": r.id});
      g.append(svg("circle", {cx: x, cy: y, r: 11}));
      g.append(svg("text", {x, y: y + 25}, c.container || c.host));
      graph.append(g);
    });
    const g = svg("g", {class: "node router" + (stuckOn(r.id) ? " has-stuck" : ""),
                        "data-id": r.id});
    g.append(svg("circle", {cx: at.x, cy: at.y, r: 20}));
    g.append(svg("text", {x: at.x, y: at.y - 27}, r.id));
    g.append(svg("text", {class: "count", x: at.x, y: at.y + 40},
                 clients + " client" + (clients === 1 ? "" : "s")));
    graph.append(g);
  }
}

function drawThroughput(totals) {
  const canvas = document.getElementById("throughput");
  const ctx = canvas.getContext("2d");
  const w = canvas.width, h = canvas.height, left = 56, bottom = 22, top = 10;
  ctx.clearRect(0, 0, w, h);
  const points = state.history;
  const peak = Math.max(10, ...points.map(p => Math.max(p.in, p.out)));
  const scale = Math.pow(10, Math.floor(Math.log10(peak)));
  const ceiling = Math.ceil(peak / scale) * scale;
  ctx.font = "11px system-ui, sans-serif";
  ctx.fillStyle = "#6b7483";
  ctx.strokeStyle = "#e3e6ea";
  for (let i = 0; i <= 4; i++) {
    const y = top + (h - top - bottom) * (1 - i / 4);
    ctx.beginPath(); ctx.moveTo(left, y); ctx.lineTo(w, y); ctx.stroke();
    ctx.fillText(Math.round(ceiling * i / 4).toLocaleString(), 4, y + 4);
  }
  const end = points.length ? points[points.length - 1].time : Date.now();
  for (const minutes of [0, 1, 2, 3, 4, 5]) {
    const x = left + (w - left) * (1 - minutes * 60 / HISTORY_S);
    ctx.fillText(minutes ? "-" + minutes + " min" : "now", Math.min(x - 10, w - 26), h - 6);
  }
  for (const [key, color] of [["in", "#2f6fb3"], ["out", "#3d9970"]]) {
    ctx.strokeStyle = color;
    ctx.lineWidth = 2;
    ctx.beginPath();
    points.forEach((p, i) => {
      const x = left + (w - left) * (1 - (end - p.time) / (HISTORY_S * 1000));
      const y = top + (h - top - bottom) * (1 - p[key] / ceiling);
      if (i) ctx.lineTo(x, y); else ctx.moveTo(x, y);
    });
    ctx.stroke();
  }
  ctx.lineWidth = 1;
  const now = document.getElementById("throughput-now");
  now.textContent = totals.measured ?
    " now: " + Math.round(totals.in) + " in/s, " + Math.round(totals.out) + " out/s" : "";
  canvas.dataset.in = totals.measured ? totals.in.toFixed(1) : "";
  canvas.dataset.out = totals.measured ? totals.out.toFixed(1) : "";
  canvas.dataset.samples = points.length;
}

function fillAddresses(now) {
  const merged = {};
  for (const data of Object.values(state.data)) {
    for (const a of data.addresses || []) {
      if (a.inProcess || /^[A-Z]/.test(a.name || "") && !(a.name || "").startsWith("M")) {
        continue;  // the routers' own addresses
      }
      const name = a.name || a.key;
      const shownName = addressName(name);
      const entry = merged[shownName] || (merged[shownName] = {
        distribution: a.distribution, consumers: 0, remote: 0, ingress: 0, egress: 0});
      entry.consumers += a.subscriberCount || 0;
      entry.remote = Math.max(entry.remote, a.remoteCount || 0);
      entry.ingress += a.deliveriesIngress || 0;
      entry.egress += a.deliveriesEgress || 0;
    }
  }
  const body = document.querySelector("#addresses tbody");
  body.replaceChildren();
  for (const name of Object.keys(merged).sort()) {
    const a = merged[name];
    const rin = rate("addr-in/" + name, a.ingress, now);
    const rout = rate("addr-out/" + name, a.egress, now);
    body.append(el("tr", {"data-address": name, "data-rate": rin === null ? "" : rin.toFixed(1)},
      el("td", {}, name), el("td", {}, a.distribution || ""),
      el("td", {class: "num"}, a.consumers), el("td", {class: "num"}, a.remote),
      el("td", {class: "num"}, shown(rin)), el("td", {class: "num"}, shown(rout)),
      el("td", {class: "num"}, a.egress)));
  }
}

function fillConfigs() {
  const select = document.getElementById("config-router");
  const chosen = select.value || state.me.router;
  select.replaceChildren(...state.routers.map(r => el("option", {value: r.id}, r.id)));
  select.value = state.routers.some(r => r.id === chosen) ? chosen : state.me.router;
  const data = state.data[select.value] || {};
  const body = document.querySelector("#config-addresses tbody");
  body.replaceChildren();
  for (const c of data.configs || []) {
    const cells = [el("td", {}, c.prefix || c.pattern || ""), el("td", {}, c.distribution || ""),
                   el("td", {}, c.waypoint ? "yes" : "")];
    const action = el("td", {});
    if (state.me.write) {
      action.append(el("button", {class: "write", onclick: () => change(
        "DELETE", "router.config.address/" + encodeURIComponent(c.name), select.value)},
        "Delete"));
    }
    body.append(el("tr", {"data-prefix": c.prefix || c.pattern || ""}, ...cells, action));
  }
}

function fillConnections(now) {
  const body = document.querySelector("#connections tbody");
  body.replaceChildren();
  for (const [id, data] of Object.entries(state.data)) {
    for (const c of data.connections || []) {
      const links = (data.links || []).filter(l => String(l.connectionId) === String(c.identity));
      const delivered = links.reduce((n, l) => n + (l.deliveryCount || 0), 0);
      const r = rate("conn/" + id + "/" + c.identity, delivered, now);
      const stuck = links.some(l => (l.deliveriesStuck || 0) > 0);
      const action = el("td", {});
      if (state.me.write && c.role !== "inter-router" && c.role !== "edge") {
        action.append(el("button", {class: "write", onclick: () => change(
          "PATCH", "connection/" + encodeURIComponent(c.name), id, {adminStatus: "deleted"})},
          "Close"));
      }
      body.append(el("tr", {class: stuck ? "stuck" : "", "data-router": id,
                            "data-role": c.role || "", "data-container": c.container || ""},
        el("td", {}, id), el("td", {}, c.identity), el("td", {}, c.role || ""),
        el("td", {}, c.container || ""), el("td", {}, c.host || ""), el("td", {}, c.dir || ""),
        el("td", {}, c.user || ""),
        el("td", {}, c.isEncrypted ? (c.sslProto || "TLS") : (c.isAuthenticated ? "SASL" : "")),
        el("td", {class: "num"}, links.length), el("td", {class: "num"}, shown(r)), action));
    }
  }
}

function fillLinks() {
  const body = document.querySelector("#links tbody");
  body.replaceChildren();
  for (const [id, data] of Object.entries(state.data)) {
    for (const l of data.links || []) {
      if (l.linkType === "router-control") continue;
      const stuck = (l.deliveriesStuck || 0) > 0;
      body.append(el("tr", {class: stuck ? "stuck" : "", "data-router": id,
                            "data-address": addressName(l.owningAddr),
                            "data-stuck": l.deliveriesStuck || 0},
        el("td", {}, id), el("td", {}, shown(l.connectionId)), el("td", {}, l.linkType || ""),
        el("td", {}, l.linkDir || ""), el("td", {}, addressName(l.owningAddr)),
        el("td", {class: "num"}, shown(l.creditAvailable)),
        el("td", {class: "num"}, shown(l.undeliveredCount)),
        el("td", {class: "num"}, shown(l.unsettledCount)),
        el("td", {class: "num"}, shown(l.deliveryCount)),
        el("td", {class: "num"}, shown(l.deliveriesStuck))));
    }
  }
}

function fillLog() {
  const body = document.querySelector("#log tbody");
  body.replaceChildren();
  for (const record of state.log.slice().reverse()) {
    const [module, level, text, , , created] = record;
    const time = typeof created === "number" ? new Date(created * 1000).toLocaleTimeString() : "";
    body.append(el("tr", {}, el("td", {}, time), el("td", {}, module), el("td", {}, level),
                   el("td", {class: "text"}, text)));
  }
}

// -- changing the router (offered only when the endpoint says this user may) ---------

async function change(method, path, router, body) {
  const where = router && router !== state.me.router ? "?router=" + encodeURIComponent(router) : "";
  const options = {method};
  if (body !== undefined) {
    options.body = JSON.stringify(body);
    options.headers = {"Content-Type": "application/json"};
  }
  try {
    await api(path + where, options);
    document.getElementById("create-error").textContent = "";
  } catch (error) {
    document.getElementById("create-error").textContent = error.message;
  }
  refresh();
}

function setUpWrites() {
  const form = document.getElementById("create-address");
  if (!state.me.write) {
    form.remove();
    return;
  }
  form.hidden = false;
  form.addEventListener("submit", event => {
    event.preventDefault();
    const prefix = form.elements.prefix.value.trim();
    const router = document.getElementById("config-router").value;
    change("POST", "router.config.address", router,
           {name: prefix, prefix, distribution: form.elements.distribution.value});
    form.reset();
  });
}

async function start() {
  try {
    state.me = await api("whoami");
  } catch (error) {
    document.getElementById("status").textContent = "cannot read the router: " + error.message;
    return;
  }
  document.getElementById("router-id").textContent = state.me.router;
  document.title = "Hop console: " + state.me.router;
  const who = document.getElementById("who");
  who.textContent = (state.me.user ? state.me.user : "anonymous") +
    (state.me.write ? ", may change the router" : ", read-only");
  who.dataset.write = state.me.write;
  setUpWrites();
  const loop = async () => {
    try {
      await refresh();
    } catch (error) {
      document.getElementById("status").textContent = "error: " + error.message;
    }
    setTimeout(loop, POLL_MS);
  };
  loop();
}

start();
