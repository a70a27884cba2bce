"""The API's documentation pages (Swagger UI at ``/docs``, ReDoc at ``/redoc``) served without a CDN.

The JavaScript and CSS of both come from the ``fastapi-offline`` package (Swagger UI, Apache-2.0; ReDoc, MIT;
the package itself MIT), the two start-up scripts from ``static/`` here; see :mod:`app.core.docs_ui.pages`.
"""
