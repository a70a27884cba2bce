// Starts ReDoc in #redoc. A file rather than an inline script, so that the page's Content-Security-Policy
// can allow scripts from this origin only. This script element's data attributes carry the document's URL
// and the response's style nonce, which ReDoc puts on the <style> elements it creates (the policy allows
// styles from this origin and with that nonce only).
(function () {
  "use strict";
  var data = document.currentScript.dataset;
  Redoc.init(data.openapiUrl, { nonce: data.styleNonce }, document.getElementById("redoc"));
})();
