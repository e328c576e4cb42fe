"""Reports: the model both counters fill, and its renderers.

| module | job |
| --- | --- |
| ``model.py`` | ``Report``, ``Row``, ``OpRecord``, ``Memory``, ``Unsupported`` |
| ``views.py`` | tree walk (depth, sort, top-k) and the op-type summary |
| ``units.py`` | human units (GMac, MFLOPs, MB, ms) |
| ``table.py`` | rich tree table, tabulate (plain, github, grid, markdown) |
| ``export.py`` | JSON (schema in its docstring) and CSV |
| ``html.py`` | the module table as HTML (a static table page) |
| ``page/`` | the explorable page: ``to_html``, ``--format html``, a notebook's ``_repr_html_`` |
| ``trace.py`` | Chrome trace with onnxruntime's profiler field names |
"""

from .model import Memory, OpRecord, Report, Row, Unsupported
from .units import bytes_to_string, flops_to_string, macs_to_string, params_to_string, time_to_string
from .views import OpTypeSummary

__all__ = ["Report", "Row", "OpRecord", "Memory", "Unsupported", "OpTypeSummary", "macs_to_string",
           "flops_to_string", "params_to_string", "bytes_to_string", "time_to_string"]
