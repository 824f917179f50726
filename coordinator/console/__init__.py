"""The web console: static pages, shipped in this package, that talk only to `/api/v1`.

`setup_console(app)` serves them at `/console/` (and redirects `/` there). The files are plain
HTML, CSS and JavaScript modules: no build step, nothing fetched from elsewhere at run time.
"""

from .serve import ASSET_TYPES, CONSOLE_PREFIX, asset_names, setup_console

__all__ = ["ASSET_TYPES", "CONSOLE_PREFIX", "asset_names", "setup_console"]
