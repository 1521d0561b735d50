// The LEO/HW chart of one partition, drawn as SVG: one step line per replica's LEO, a dashed
// one for the HW, over the last five minutes, with the partition's ISR changes and elections
// marked as vertical lines. window.chartShow / chartAddSample / chartSetMarks are its API.
"use strict";

(() => {
  const NS = "http://www.w3.org/2000/svg";
  const WINDOW_MS = 5 * 60 * 1000;
  const W = 720, H = 260, PAD = { l: 56, r: 10, t: 10, b: 22 };
  const COLORS = ["#1565c0", "#2e7d32", "#ef6c00", "#6a1b9a", "#00838f", "#ad1457"];
  let key = null, replicas = [], samples = [], marks = [];
  let pending = false;

  function svg(tag, attrs, text) {
    const node = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function stepPath(points, x, y) {
    let d = "";
    points.forEach(([t, v], i) => {
      d += i === 0 ? `M${x(t)},${y(v)}` : `H${x(t)}V${y(v)}`;
    });
    return d;
  }

  function draw() {
    pending = false;
    const root = document.getElementById("chart");
    if (!root) return;
    root.replaceChildren();
    if (key === null || samples.length === 0) {
      root.append(svg("text", { x: W / 2, y: H / 2, "text-anchor": "middle", fill: "#8a93a3" },
        key === null ? "click a partition to chart it" : "no samples yet"));
      return;
    }
    const now = Date.now();
    const t0 = Math.max(samples[0].t, now - WINDOW_MS);
    const values = [];
    for (const s of samples) {
      if (s.hw !== null) values.push(s.hw);
      for (const v of Object.values(s.leo)) if (v !== null) values.push(v);
    }
    let lo = Math.min(...values), hi = Math.max(...values);
    if (!isFinite(lo)) { lo = 0; hi = 1; }
    if (hi === lo) hi = lo + 1;
    const x = (t) => (PAD.l + (Math.max(t, t0) - t0) / Math.max(1, now - t0) * (W - PAD.l - PAD.r)).toFixed(1);
    const y = (v) => (H - PAD.b - (v - lo) / (hi - lo) * (H - PAD.t - PAD.b)).toFixed(1);
    root.append(svg("line", { x1: PAD.l, y1: H - PAD.b, x2: W - PAD.r, y2: H - PAD.b, stroke: "#ccd" }));
    root.append(svg("text", { x: PAD.l - 4, y: y(hi) + 4, "text-anchor": "end", "font-size": 10 }, hi));
    root.append(svg("text", { x: PAD.l - 4, y: y(lo), "text-anchor": "end", "font-size": 10 }, lo));
    root.append(svg("text", { x: W - PAD.r, y: H - 6, "text-anchor": "end", "font-size": 10 }, "now"));
    for (const m of marks) {
      if (m.ts < t0) continue;
      const mx = x(m.ts);
      root.append(svg("line", { x1: mx, y1: PAD.t, x2: mx, y2: H - PAD.b, stroke: "#b0b7c3", "stroke-dasharray": "2,3", "data-mark": m.event }));
      root.append(svg("text", { x: +mx + 2, y: PAD.t + 9, "font-size": 9, fill: "#5b6475" }, m.event));
    }
    const last = samples[samples.length - 1];
    const extend = (pts) => (pts.length ? [...pts, [now, pts[pts.length - 1][1]]] : pts);
    replicas.forEach((b, i) => {
      const pts = samples.filter((s) => s.leo[b] !== null && s.leo[b] !== undefined).map((s) => [s.t, s.leo[b]]);
      if (pts.length) {
        root.append(svg("path", { d: stepPath(extend(pts), x, y), fill: "none", stroke: COLORS[i % COLORS.length], "stroke-width": 1.6, "data-series": `leo-${b}` }));
      }
    });
    const hw = samples.filter((s) => s.hw !== null).map((s) => [s.t, s.hw]);
    if (hw.length) {
      root.append(svg("path", { d: stepPath(extend(hw), x, y), fill: "none", stroke: "#111", "stroke-width": 1.2, "stroke-dasharray": "5,3", "data-series": "hw" }));
    }
    const legend = document.getElementById("chart-legend");
    legend.replaceChildren(...replicas.map((b, i) => {
      const s = document.createElement("span");
      s.style.color = COLORS[i % COLORS.length];
      s.textContent = `— LEO of broker ${b}: ${last.leo[b] ?? "?"}`;
      return s;
    }));
    const h = document.createElement("span");
    h.textContent = `- - HW: ${last.hw ?? "?"}`;
    legend.append(h);
  }

  function redraw() {
    if (!pending) { pending = true; requestAnimationFrame(draw); }
  }

  window.chartShow = (k, reps, history) => {
    key = k; replicas = reps; samples = history.slice(); marks = [];
    redraw();
  };
  window.chartAddSample = (p, t) => {
    if (p.key !== key) return;
    const leader = p.replicas_state.find((r) => r.broker === p.leader);
    const leo = {};
    for (const r of p.replicas_state) leo[r.broker] = r.log_end_offset;
    samples.push({ t, hw: leader ? leader.high_watermark : null, leo });
    while (samples.length > 1 && samples[0].t < t - WINDOW_MS) samples.shift();
    replicas = p.replicas;
    redraw();
  };
  window.chartSetMarks = (list) => { marks = list; redraw(); };
  setInterval(redraw, 5000); // the time axis moves even when nothing else does
})();
