"""Batch systems (LRMS): the plugin registry (registry.py) and the built-in plugins (plugins/).

The LRMS plugin API keeps its documented 1.x path: ``from glueinfo.lrms
import LrmsPlugin, LrmsContext, LrmsQueryError`` (the code lives in
glueinfo.lrms.registry).
"""

from glueinfo.lrms.registry import LrmsContext, LrmsError, LrmsPlugin, LrmsQueryError

__all__ = ["LrmsContext", "LrmsError", "LrmsPlugin", "LrmsQueryError"]
