// Live updates: every few seconds, fetch this same page with X-Partial: 1 and swap <main> when
// its digest (X-Digest; the page's own is <main data-digest>) differs from what is shown.
// Paused while a form field has focus or holds unsent input, or the tab is hidden. No
// dependencies.
(function () {
  "use strict";
  var main = document.getElementById("main");
  if (!main || !main.dataset.live) return;
  var every = Math.max(parseInt(main.dataset.live, 10) || 3000, 1000);
  var liveText = document.getElementById("live-text");
  var live = document.getElementById("live");
  var inFlight = false;
  var digest = null;

  // A field has focus, or a form holds something the operator typed or chose and has not sent
  // (a refresh would throw it away).
  function busy() {
    var el = document.activeElement;
    if (el && el.matches && el.matches("input, textarea, select")) return true;
    var fields = main.querySelectorAll("form input, form textarea, form select");
    for (var i = 0; i < fields.length; i++) {
      var f = fields[i];
      if (f.type === "hidden") continue;
      if (f.type === "checkbox" || f.type === "radio") {
        if (f.checked !== f.defaultChecked) return true;
      } else if (f.tagName === "SELECT") {
        for (var j = 0; j < f.options.length; j++) {
          if (f.options[j].selected !== f.options[j].defaultSelected) return true;
        }
      } else if (f.value !== f.defaultValue) {
        return true;
      }
    }
    return false;
  }

  // The counts in the navigation, from the hidden spans a partial page carries.
  function countOne(freshId, shownId, label) {
    var fresh = document.getElementById(freshId);
    var shown = document.getElementById(shownId);
    if (!fresh || !shown) return;
    var count = fresh.getAttribute("data-count");
    shown.textContent = count;
    shown.setAttribute("aria-label", count + " " + label);
    shown.classList.toggle("nav-count-on", count !== "0");
  }

  function countWaiting() {
    countOne("inbox-waiting", "nav-inbox-count", "waiting");
    countOne("approvals-pending", "nav-approvals-count", "waiting for approval");
  }

  function mark(ok) {
    if (!live) return;
    live.classList.toggle("stale", !ok);
    if (liveText) liveText.textContent = ok ? "live" : "offline";
  }

  function tick() {
    if (inFlight || document.hidden || busy()) return;
    inFlight = true;
    fetch(window.location.href, {
      headers: { "X-Partial": "1" },
      credentials: "same-origin",
      cache: "no-store",
      redirect: "follow",
    })
      .then(function (response) {
        if (response.redirected || response.status === 401) {
          window.location.assign("/login");
          return null;
        }
        if (!response.ok) {
          mark(response.status < 500);
          return null;
        }
        digest = response.headers.get("X-Digest");
        return response.text();
      })
      .then(function (html) {
        if (html === null || html === undefined) return;
        mark(true);
        if (digest !== main.dataset.digest && !busy()) {
          main.innerHTML = html;
          main.dataset.digest = digest || "";
          countWaiting();
          main.dispatchEvent(new CustomEvent("inbots:refreshed"));
        }
      })
      .catch(function () {
        mark(false);
      })
      .finally(function () {
        inFlight = false;
      });
  }

  window.setInterval(tick, every);
  document.addEventListener("visibilitychange", function () {
    if (!document.hidden) tick();
  });
})();
