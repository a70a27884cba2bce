"""``/docs`` (Swagger UI) and ``/redoc`` (ReDoc) from assets this server holds, under a strict CSP.

FastAPI's own pages load their JavaScript and CSS from a CDN and start them with an inline script, so they
are blank offline and need ``'unsafe-inline'``. These pages reference only same-origin files:

- ``/docs-assets/vendor/``: the bundles shipped in the ``fastapi-offline`` package (``swagger-ui-bundle.js``,
  ``swagger-ui.css``, ``redoc.standalone.js``, ``favicon.png``; Swagger UI is Apache-2.0 and ReDoc MIT, as
  the first line of each bundle says, the package MIT);
- ``/docs-assets/redoc.standalone.js``: ReDoc's bundle with its one remote URL (Redocly's logo under the
  side menu, from ``cdn.redoc.ly``) removed: the image then hides itself and the text link stays;
- ``/docs-assets/``: this package's ``static/`` folder (the two start-up scripts and the page's CSS).

Each page carries a Content-Security-Policy allowing scripts, styles, fonts and requests from this origin
only (images also as ``data:`` URIs, which Swagger UI's CSS uses for its icons; on ``/redoc`` also the
``<style>`` elements ReDoc writes, by their hashes: :data:`REDOC_STYLE_HASHES`); no inline script anywhere. The
other security headers come from :class:`app.core.middleware.SecurityHeadersMiddleware` as on every
response.
"""

from __future__ import annotations

from functools import lru_cache
from html import escape
from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles

ASSETS = "/docs-assets"
"""Where this package's files are served; the vendored bundles are under ``ASSETS + "/vendor"``."""
OWN_FILES = Path(__file__).with_name("static")
VENDOR_FILES = Path(str(files("fastapi_offline").joinpath("static")))
"""The folder of Swagger UI's and ReDoc's bundles inside the installed ``fastapi-offline`` package."""
REDOCLY_LOGO = b"https://cdn.redoc.ly/redoc/logo-mini.svg"

REDOC_STYLE_HASHES = (
    "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=",  # an empty <style> element
    "sha256-QMIg+bpjm3JdElJ388KYke01izlUW0UoNOeKjpMxdgc=",  # perfect-scrollbar's CSS
)
"""The ``<style>`` elements ReDoc's bundle (fastapi-offline 1.7.7) writes: empty ones, whose rules
styled-components then adds through the CSSOM (``insertRule``, which a CSP does not govern), and one holding
perfect-scrollbar's CSS. Another bundle may need others: the headless-Chromium test fails on any CSP violation."""


def content_security_policy(redoc: bool = False) -> str:
    """The documentation pages' policy: no script or style from another origin, no inline script; on ReDoc's
    page also the ``<style>`` elements of :data:`REDOC_STYLE_HASHES`."""
    styles = ["'self'", *(f"'{h}'" for h in REDOC_STYLE_HASHES if redoc)]
    return "; ".join(
        (
            "default-src 'none'",
            "script-src 'self'",
            "style-src " + " ".join(styles),
            "img-src 'self' data:",
            "font-src 'self'",
            "connect-src 'self'",
            "worker-src 'self' blob:",
            "base-uri 'none'",
            "form-action 'self'",
            "frame-ancestors 'none'",
        )
    )


@lru_cache(maxsize=1)
def redoc_bundle() -> bytes:
    """ReDoc's standalone bundle without the URL of Redocly's logo (read once per process)."""
    return (VENDOR_FILES / "redoc.standalone.js").read_bytes().replace(REDOCLY_LOGO, b"")


def install_docs(app: FastAPI, openapi_url: str = "/openapi.json") -> None:
    """Add ``GET /docs`` and ``GET /redoc`` (left out of the OpenAPI document) and serve their assets."""

    @app.get("/docs", include_in_schema=False)
    def swagger_ui(request: Request) -> HTMLResponse:
        root = escape(str(request.scope.get("root_path", "")))
        body = f"""<div id="swagger-ui"></div>
<script src="{root}{ASSETS}/vendor/swagger-ui-bundle.js"></script>
<script src="{root}{ASSETS}/swagger-init.js" data-openapi-url="{root}{escape(openapi_url)}"></script>"""
        return _page(f"{app.title} - Swagger UI", root, ["vendor/swagger-ui.css", "docs.css"], body, redoc=False)

    @app.get("/redoc", include_in_schema=False)
    def redoc(request: Request) -> HTMLResponse:
        root = escape(str(request.scope.get("root_path", "")))
        body = f"""<div id="redoc"></div>
<script src="{root}{ASSETS}/redoc.standalone.js"></script>
<script src="{root}{ASSETS}/redoc-init.js" data-openapi-url="{root}{escape(openapi_url)}"></script>"""
        return _page(f"{app.title} - ReDoc", root, ["docs.css"], body, redoc=True)

    # Before the mounts: a mount at ASSETS would answer this path first.
    @app.get(f"{ASSETS}/redoc.standalone.js", include_in_schema=False)
    def redoc_js() -> Response:
        headers = {"Cache-Control": "public, max-age=86400"}
        return Response(redoc_bundle(), media_type="text/javascript; charset=utf-8", headers=headers)

    app.mount(f"{ASSETS}/vendor", StaticFiles(directory=VENDOR_FILES), name="docs-vendor")
    app.mount(ASSETS, StaticFiles(directory=OWN_FILES), name="docs-assets")


def _page(title: str, root: str, styles: list[str], body: str, *, redoc: bool) -> HTMLResponse:
    links = "\n".join(f'<link rel="stylesheet" href="{root}{ASSETS}/{name}">' for name in styles)
    html = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(title)}</title>
<link rel="icon" type="image/png" href="{root}{ASSETS}/vendor/favicon.png">
{links}
</head>
<body>
{body}
</body>
</html>
"""
    return HTMLResponse(html, headers={"Content-Security-Policy": content_security_policy(redoc)})
