"""The HTTP face of the engine: a read-only JSON API and a search page.

``cqa-search serve INDEX`` runs it (:mod:`cqa_search.cli.serve`); :func:`create_app` makes
the ASGI application for any ASGI server. Needs the ``server`` extra
(``pip install 'cqa-search[server]'``: FastAPI and uvicorn), imported only here.
"""
from .app import create_app

__all__ = ["create_app"]
