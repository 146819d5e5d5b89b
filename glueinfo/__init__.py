"""glueinfo: a GLUE / SSS grid information provider.

Data flows one way: collect (providers/) -> model (model.py) -> aggregate ->
render -> publish.
"""

__version__ = "0.1.0"
