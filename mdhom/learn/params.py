"""scikit-learn's parameter protocol for the learners, from their option table.

Every estimator takes its options as keyword arguments stored under the same names (scikit-learn's rule), so
``get_params``, ``set_params`` and ``repr`` are the same code for all of them; an estimator names its
:class:`~mdhom.learn.options.OptionTable` as ``_options``.
"""

from __future__ import annotations

import inspect
from typing import Any, ClassVar

from mdhom.learn.options import OptionTable


class OptionParams:
    """``get_params`` / ``set_params`` / ``repr`` over the constructor's arguments (the option table's names)."""

    _options: ClassVar[OptionTable]

    @classmethod
    def _get_param_names(cls) -> list[str]:
        return [p for p in inspect.signature(cls.__init__).parameters if p != "self"]

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self._get_param_names()}

    def set_params(self, **params: Any) -> OptionParams:
        valid = self._get_param_names()
        for name, value in params.items():
            if name not in valid:
                raise ValueError(f"Invalid parameter {name!r} for estimator {type(self).__name__}. "
                                 f"Valid parameters are: {valid!r}.")
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        """Only the options that differ from their defaults, as scikit-learn prints estimators."""
        defaults = self._options.defaults
        changed = [f"{k}={v!r}" for k, v in self.get_params().items()
                   if not (v is defaults[k] or (type(v) is type(defaults[k]) and v == defaults[k]))]
        return f"{type(self).__name__}({', '.join(changed)})"
