"""The spec document: pydantic models, a YAML loader with line-numbered errors, and durations.

```python
from daemon.spec import load_spec, SpecDocument, SpecValidationError

try:
    doc = load_spec(text, source="spec.yaml")
except SpecValidationError as err:
    print(err)            # spec.yaml:14 invariants.tests.check.type: unknown check type ...
    err.details()         # {"errors": [{"loc": ..., "line": ..., "msg": ...}]}
```
"""

from .durations import format_duration, format_size, parse_duration, parse_size
from .errors import SpecIssue, SpecValidationError
from .loader import load_spec, load_spec_file, validate_spec_data
from .models import *  # noqa: F403  (the model classes; see models.__all__)
from .models import __all__ as _model_names

__all__ = [
    "load_spec",
    "load_spec_file",
    "validate_spec_data",
    "SpecValidationError",
    "SpecIssue",
    "parse_duration",
    "format_duration",
    "parse_size",
    "format_size",
    *_model_names,
]
