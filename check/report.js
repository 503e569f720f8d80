// The report's timeline: draws the items of the data in view (rows with nothing in view are left
// out), zooms and pans, filters by key, client and watch, and takes a violation's links to its items.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var rows = data.rows || [], items = data.items || [];
  var LABEL = 155, MAXDRAW = 3000, MAXROWS = 300;
  var byId = {};
  var lo = Infinity, hi = -Infinity;
  items.forEach(function (it) {
    byId[it.id] = it;
    lo = Math.min(lo, it.s);
    hi = Math.max(hi, it.e);
  });
  if (!(lo <= hi)) { lo = 0; hi = 1; }
  if (hi - lo < 1) { hi = lo + 1; }
  var view = { a: lo, b: hi };
  var highlighted = {}, selected = null;
  var $ = function (id) { return document.getElementById(id); };
  var tl = $("timeline"), fKey = $("f-key"), fClient = $("f-client"), fWatch = $("f-watch"), fBad = $("f-bad");
  var status = $("tl-status");

  var clients = {};
  rows.forEach(function (r, i) {
    var o = document.createElement("option");
    if (r.kind === "watch") {
      o.value = String(i);
      o.textContent = r.label;
      fWatch.appendChild(o);
    } else if (!clients[r.client]) {
      clients[r.client] = true;
      o.value = String(r.client);
      o.textContent = r.label;
      fClient.appendChild(o);
    }
  });

  function rowPasses(ri) {
    var r = rows[ri];
    if (fClient.value !== "" && String(r.client) !== fClient.value) { return false; }
    if (fWatch.value !== "" && String(ri) !== fWatch.value) { return false; }
    return true;
  }

  function passes(it) {
    if (!rowPasses(it.row)) { return false; }
    if (fBad.checked && !(it.v && it.v.length)) { return false; }
    var k = fKey.value.trim();
    if (k === "") { return true; }
    var ks = it.k || [];
    for (var j = 0; j < ks.length; j++) {
      if (ks[j].indexOf(k) >= 0) { return true; }
    }
    return false;
  }

  // fmt is time t from the start of the history, in the unit the window's span reads best in.
  function fmt(t) {
    var d = t - lo, span = view.b - view.a;
    if (span >= 5e9) { return (d / 1e9).toFixed(3) + " s"; }
    if (span >= 5e6) { return (d / 1e6).toFixed(span >= 5e7 ? 1 : 2) + " ms"; }
    if (span >= 5e3) { return (d / 1e3).toFixed(span >= 5e4 ? 1 : 2) + " µs"; }
    return d.toFixed(0) + " ns";
  }

  function laneWidth() { return Math.max(tl.clientWidth - LABEL - 10, 200); }

  function axis(width) {
    var ax = document.createElement("div");
    ax.className = "axis";
    var n = Math.max(2, Math.floor(width / 120));
    for (var i = 0; i <= n; i++) {
      var t = view.a + (view.b - view.a) * i / n;
      var tk = document.createElement("span");
      tk.className = i === n ? "tick last" : "tick";
      tk.style.left = (LABEL + width * i / n) + "px";
      tk.textContent = fmt(t);
      ax.appendChild(tk);
    }
    return ax;
  }

  function drawItem(it, x, width) {
    var el = document.createElement("div");
    var l = Math.max(0, x(it.s)), r = Math.min(width, x(it.e));
    el.className = "it " + it.c + (it.v && it.v.length ? " bad" : "") + (highlighted[it.id] ? " hl" : "") + (selected === it ? " sel" : "");
    el.id = "i-" + it.id;
    el.style.left = l + "px";
    el.style.width = Math.max(r - l, 3) + "px";
    el.title = it.l;
    if (r - l > 40) { el.textContent = it.l; }
    el.dataset.id = it.id;
    return el;
  }

  // render draws the rows with something in view, at most MAXROWS rows and MAXDRAW items, always
  // those highlighted.
  function render() {
    var width = laneWidth(), span = view.b - view.a;
    var x = function (t) { return (t - view.a) / span * width; };
    var perRow = {}, inView = 0;
    items.forEach(function (it) {
      if (it.e < view.a || it.s > view.b || !passes(it)) { return; }
      inView++;
      (perRow[it.row] = perRow[it.row] || []).push(it);
    });
    var shown = Object.keys(perRow).map(Number).sort(function (p, q) { return p - q; });
    var frag = document.createDocumentFragment();
    frag.appendChild(axis(width));
    var drawn = 0, rowsDrawn = 0, left = 0;
    shown.forEach(function (ri) {
      var its = perRow[ri];
      var must = its.filter(function (it) { return highlighted[it.id] || selected === it; });
      if (rowsDrawn >= MAXROWS && must.length === 0) { left += its.length; return; }
      var row = document.createElement("div");
      row.className = "row " + rows[ri].kind;
      row.dataset.row = String(ri);
      var lbl = document.createElement("div");
      lbl.className = "lbl";
      lbl.textContent = rows[ri].label;
      lbl.title = rows[ri].text || rows[ri].label;
      var lane = document.createElement("div");
      lane.className = "lane";
      its.forEach(function (it) {
        if (drawn >= MAXDRAW && !(highlighted[it.id] || selected === it)) { left++; return; }
        lane.appendChild(drawItem(it, x, width));
        drawn++;
      });
      row.appendChild(lbl);
      row.appendChild(lane);
      frag.appendChild(row);
      rowsDrawn++;
    });
    tl.replaceChildren(frag);
    status.textContent = fmt(view.a) + " – " + fmt(view.b) + ": " + inView + " items in " + shown.length + " rows" +
      (left > 0 ? "; " + left + " not drawn, zoom in or filter" : "");
  }

  function zoom(f, center) {
    var c = center === undefined ? (view.a + view.b) / 2 : center;
    var a = c - (c - view.a) * f, b = c + (view.b - c) * f;
    if (b - a < 10) { return; }
    view = { a: Math.max(a, lo - (hi - lo)), b: Math.min(b, hi + (hi - lo)) };
    render();
  }

  function pan(frac) {
    var d = (view.b - view.a) * frac;
    view = { a: view.a + d, b: view.b + d };
    render();
  }

  function select(it) {
    selected = it;
    var p = $("detail");
    p.hidden = false;
    $("detail-title").textContent = it.id + ": " + it.l;
    $("detail-text").textContent = it.t + "\n\n" + (it.e !== it.s ? "call " + it.s + " ns, return " + it.e + " ns" : "received " + it.s + " ns") +
      " (from the history's origin)";
    var links = $("detail-links");
    links.replaceChildren();
    (it.v || []).forEach(function (vi) {
      var a = document.createElement("a");
      a.href = "#v-" + vi;
      a.textContent = "violation #" + vi + " ";
      links.appendChild(a);
    });
    render();
  }

  // focus shows the items ids name: it clears the filters that would hide one, zooms to them,
  // highlights them, scrolls the first into view and shows it in the detail panel.
  function focus(ids) {
    var its = ids.map(function (id) { return byId[id]; }).filter(Boolean);
    if (its.length === 0) { return; }
    highlighted = {};
    its.forEach(function (it) { highlighted[it.id] = true; });
    if (its.some(function (it) { return !passes(it); })) {
      fKey.value = ""; fClient.value = ""; fWatch.value = ""; fBad.checked = false;
    }
    var a = Math.min.apply(null, its.map(function (it) { return it.s; }));
    var b = Math.max.apply(null, its.map(function (it) { return it.e; }));
    var pad = Math.max((b - a) * 0.3, (hi - lo) / 100, 1000);
    view = { a: a - pad, b: b + pad };
    select(its[0]);
    var el = $("i-" + its[0].id);
    if (el) { el.scrollIntoView({ block: "center", inline: "nearest" }); }
  }

  document.addEventListener("click", function (e) {
    var t = e.target;
    if (!(t instanceof Element)) { return; }
    var ref = t.closest("a.ref");
    if (ref) {
      e.preventDefault();
      focus([ref.dataset.item]);
      return;
    }
    var all = t.closest("button.showall");
    if (all) {
      var v = $("v-" + all.dataset.violation);
      focus(Array.prototype.map.call(v.querySelectorAll("a.ref"), function (a) { return a.dataset.item; }));
      return;
    }
    var it = t.closest(".it");
    if (it && byId[it.dataset.id]) { select(byId[it.dataset.id]); }
  });
  $("detail-close").addEventListener("click", function () { $("detail").hidden = true; selected = null; render(); });
  $("zoom-in").addEventListener("click", function () { zoom(0.5); });
  $("zoom-out").addEventListener("click", function () { zoom(2); });
  $("pan-left").addEventListener("click", function () { pan(-0.5); });
  $("pan-right").addEventListener("click", function () { pan(0.5); });
  $("zoom-reset").addEventListener("click", function () { view = { a: lo, b: hi }; highlighted = {}; render(); });
  [fKey, fClient, fWatch, fBad].forEach(function (f) { f.addEventListener("input", render); f.addEventListener("change", render); });

  tl.addEventListener("wheel", function (e) {
    if (e.deltaX !== 0 && Math.abs(e.deltaX) > Math.abs(e.deltaY)) {
      e.preventDefault();
      pan(e.deltaX / laneWidth());
      return;
    }
    if (!e.ctrlKey && !e.altKey && !e.shiftKey && !e.metaKey) {
      // without a modifier the wheel zooms only over the lanes, so that the page still scrolls
      if (!(e.target instanceof Element) || !e.target.closest(".lane")) { return; }
    }
    e.preventDefault();
    var rect = tl.getBoundingClientRect();
    var c = view.a + (e.clientX - rect.left - LABEL) / laneWidth() * (view.b - view.a);
    zoom(e.deltaY < 0 ? 0.8 : 1.25, c);
  }, { passive: false });

  var drag = null;
  tl.addEventListener("mousedown", function (e) {
    if (e.target instanceof Element && e.target.closest(".lane") && !e.target.closest(".it")) {
      drag = { x: e.clientX, a: view.a, b: view.b };
    }
  });
  window.addEventListener("mousemove", function (e) {
    if (!drag) { return; }
    var d = (drag.x - e.clientX) / laneWidth() * (drag.b - drag.a);
    view = { a: drag.a + d, b: drag.b + d };
    render();
  });
  window.addEventListener("mouseup", function () { drag = null; });
  window.addEventListener("resize", render);

  render();
  var h = decodeURIComponent(location.hash.slice(1));
  if (h.indexOf("i-") === 0 && byId[h.slice(2)]) { focus([h.slice(2)]); }
})();
