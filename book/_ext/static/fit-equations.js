// Display equations fit their column (book/_ext/figure_sizes.py): once MathJax has typeset the page, and again
// when the window is resized, an equation wider than its box is set in a smaller size, down to MIN_SCALE of the
// text's; one wider still scrolls inside its own box (the book's CSS), never the page.
(function () {
  "use strict";
  var MIN_SCALE = 0.7;
  function fit() {
    document.querySelectorAll('mjx-container[display="true"]').forEach(function (m) {
      m.style.fontSize = "";
      if (m.offsetParent === null || m.clientWidth === 0) return;
      var ratio = m.clientWidth / m.scrollWidth;
      if (ratio >= 1) return;
      m.style.fontSize = Math.max(MIN_SCALE, Math.floor(ratio * 1000) / 1000) * 100 + "%";
    });
  }
  var timer = null;
  function soon() { clearTimeout(timer); timer = setTimeout(fit, 100); }
  function start() {
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) MathJax.startup.promise.then(fit);
    else fit();
    window.addEventListener("resize", soon);
  }
  if (document.readyState === "complete") start();
  else window.addEventListener("load", start);
})();
