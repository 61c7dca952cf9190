// Live updates: every few seconds, fetch this same page with X-Partial: 1 and swap <main>.
// Paused while a form field has focus or the tab is hidden. No dependencies.
(function () {
  "use strict";
  var main = document.getElementById("main");
  if (!main || !main.dataset.live) return;
  var every = Math.max(parseInt(main.dataset.live, 10) || 3000, 1000);
  var liveText = document.getElementById("live-text");
  var live = document.getElementById("live");
  var inFlight = false;
  var last = null;

  function busy() {
    var el = document.activeElement;
    return !!(el && el.matches && el.matches("input, textarea, select"));
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
        return response.text();
      })
      .then(function (html) {
        if (html === null || html === undefined) return;
        mark(true);
        if (html !== last && !busy()) {
          main.innerHTML = html;
          last = html;
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
