// The console's only script: it keeps the Sessions table and the live parts of the
// other pages current through Server-Sent Events. Every page works without it.
"use strict";
(function () {
  var status = document.getElementById("live-status");

  function say(text) {
    if (status) status.textContent = text;
  }

  function fromHTML(html) {
    var t = document.createElement("template");
    t.innerHTML = html.trim();
    return t.content;
  }

  function clock() {
    return new Date().toLocaleTimeString();
  }

  // The Sessions table: rows arrive and change through a watch of the Sessions.
  function liveTable(table) {
    var body = table.tBodies[0];
    var es = new EventSource(table.getAttribute("data-rows"));
    es.addEventListener("open", function () { say("Live: the table follows the Sessions."); });
    es.addEventListener("error", function () { say("Live updates interrupted; reconnecting."); });
    es.addEventListener("reload", function () { es.close(); location.reload(); });
    es.addEventListener("row", function (e) {
      var d = JSON.parse(e.data);
      var row = fromHTML(d.html).firstElementChild;
      var old = document.getElementById(d.id);
      if (old) {
        old.replaceWith(row);
        return;
      }
      var empty = body.querySelector("tr.empty");
      if (empty) empty.remove();
      body.insertBefore(row, body.firstElementChild);
      say("Session " + d.id.replace(/^session-/, "") + " added at " + clock() + ".");
    });
    es.addEventListener("remove", function (e) {
      var d = JSON.parse(e.data);
      var old = document.getElementById(d.id);
      if (old) old.remove();
    });
  }

  // Other pages: when a Session they show changes, reload their content in place,
  // unless the user is filling in a form there.
  function liveRegion(region) {
    var url = region.getAttribute("data-changes");
    var es = new EventSource(url);
    var timer = null;
    es.addEventListener("reload", function () { es.close(); location.reload(); });
    es.addEventListener("change", function () {
      clearTimeout(timer);
      timer = setTimeout(refresh, 300);
    });

    function busy(cur) {
      var a = document.activeElement;
      if (a && cur.contains(a) && a.form) return true;
      var fields = cur.querySelectorAll("textarea");
      for (var i = 0; i < fields.length; i++) if (fields[i].value) return true;
      return false;
    }

    function refresh() {
      var cur = document.querySelector("[data-changes]");
      if (!cur) return;
      if (busy(cur)) {
        say("Changes arrived; they will show when you leave the form.");
        timer = setTimeout(refresh, 2000);
        return;
      }
      var u = new URL(location.href);
      u.searchParams.set("fragment", "1");
      u.searchParams.delete("done");
      fetch(u, { credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
        .then(function (html) {
          var next = fromHTML(html).querySelector("[data-changes]");
          if (!next) return;
          var focused = document.activeElement && document.activeElement.id;
          cur.replaceWith(next);
          if (focused && document.getElementById(focused)) document.getElementById(focused).focus();
          say("Updated at " + clock() + ".");
        })
        .catch(function () { say("Could not update the page; reload it."); });
    }
  }

  if (!window.EventSource) return;
  var table = document.querySelector("table[data-rows]");
  if (table) liveTable(table);
  var region = document.querySelector("[data-changes]");
  if (region) liveRegion(region);
})();
